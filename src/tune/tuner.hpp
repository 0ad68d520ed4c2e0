// The tuner (kforge hgemm tune): the cost-model ranking of the variants measured per shape, the
// table entries that need measuring, and the verified winners written into the dispatch table.
// The CLI (src/cli/hgemm_bench.cpp) parses the flags and runs the measurement loop.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "measure/ceilings.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_table.hpp"
#include "measure/timer.hpp"
#include "report/results.hpp"

namespace kforge {

// The cost model's view of this device: its SMs and the calibrated ceilings.
kernels::DeviceModel device_model(const DeviceInfo& dev, const Ceilings& ceil);
// The tuner's ranking of `v` on `sh`: the shared cost model with its resident CTAs on device 0.
double predicted_us(const kernels::KernelVariant& v, const Shape& sh, const DeviceInfo& dev, const Ceilings& ceil);
// The variants able to run `prob` on this device, best predicted first: all (max_variants 0), or
// `max_variants` of them, each family's best-predicted quarter (at least two) among them.
std::vector<const kernels::KernelVariant*> runnable_variants(const HgemmProblem& prob, const DeviceInfo& dev,
                                                            const Ceilings& ceil, int max_variants);
// Device workspace that kforge's launches need over a set of problems: the largest of every
// variant able to run one of them on this device (the dispatcher's choice among them), and at
// least `floor_bytes`. The decode family's split-K partials are the ones that need it.
size_t workspace_bytes_for(const std::vector<Shape>& shapes, const std::vector<Layout>& layouts, Acc acc,
                           const DeviceInfo& dev, size_t floor_bytes, Dtype dtype = Dtype::kF16);
// Whether `p` must be measured: always with `retune`; otherwise when the table lacks it or, with
// `retune_stale`, holds it from a build with another set of variants.
bool needs_tuning(const DispatchTable& tuned, const kforge_hgemm_problem& p, bool retune, bool retune_stale);
// The fastest verified variant of each (shape, layout) among `rows` (ours_all in `first_mode`)
// goes into `tuned`, each verified again before it is tabled; the table is then rewritten whole
// to `table_out` (an interrupted run keeps what it had).
void record_winners(const std::vector<Measurement>& rows, Mode first_mode, DispatchTable& tuned,
                    const std::string& table_out, uint64_t seed, cudaStream_t s);

}  // namespace kforge
