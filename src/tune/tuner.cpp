// kforge hgemm tune, the parts that are the tuner's and not the bench's: which variants are worth
// measuring on a shape (the shared cost model), which table entries need measuring, and the
// verified winners written into the table. The measurement loop is `hgemm bench`'s
// (src/cli/hgemm_bench.cpp), which the tune command runs with a table to write.
#include "tune/tuner.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "core/files.hpp"
#include "ops/hgemm_verify.hpp"

namespace kforge {

// The cost model's view of this device: its SMs and the calibrated ceilings.
kernels::DeviceModel device_model(const DeviceInfo& dev, const Ceilings& ceil) {
  kernels::DeviceModel d;
  d.sms = dev.sm_count;
  d.cc = dev.cc_major * 10 + dev.cc_minor;
  d.tensor_tflops = ceil.tensor_tflops;
  d.bandwidth_gbs = ceil.bandwidth_gbs;
  return d;
}

// The tuner's ranking: the shared cost model (kernels/hgemm/cost_model.hpp) over the variant's
// KernelConfig, with its resident CTAs on device 0 (asked once per variant).
double predicted_us(const kernels::KernelVariant& v, const Shape& sh, const DeviceInfo& dev, const Ceilings& ceil) {
  return kernels::predicted_us(v.config, sh.m, sh.n, sh.k, device_model(dev, ceil), kernels::resident_ctas_cached(v, 0));
}

// The variants of the library able to run `prob` on this device, best predicted first.
std::vector<const kernels::KernelVariant*> runnable_variants(const HgemmProblem& prob, const DeviceInfo& dev,
                                                            const Ceilings& ceil, int max_variants) {
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const kforge_hgemm_problem abi = prob.abi();
  const bool hopper = dev.cc_major == 9 && dev.cc_minor == 0;
  // The small-K family's whole-K variants only where the dispatcher would send them (tiny
  // problems with unaligned rows, K up to 256): elsewhere they serve but would take the family's
  // places in the budget from variants that can win. Without a budget (max_variants 0: every
  // variant) they are measured wherever they serve (K <= 256), so that an all-variant probe shows
  // where the rule leaves time on the table.
  kernels::DeviceModel whole = device_model(dev, ceil);
  whole.whole_k = true;
  const bool whole_k = kernels::small_k_regime(abi, whole);
  std::vector<std::pair<double, const kernels::KernelVariant*>> ranked;
  for (size_t i = 0; i < count; ++i) {
    if (all[i].config.family == kernels::Family::kSm90 && !hopper) continue;
    if (all[i].config.whole_k && !whole_k && max_variants != 0) continue;
    if (all[i].supports(&abi)) ranked.push_back({predicted_us(all[i], prob.shape, dev, ceil), &all[i]});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<const kernels::KernelVariant*> out;
  if (max_variants == 0) {
    for (const auto& r : ranked) out.push_back(r.second);
    return out;
  }
  // The model ranks across families worst (decode shapes: the decode family against the Hopper
  // tiles' 64 padded rows), so each family that can run the problem sends its best-predicted
  // quarter of the budget (at least two) first; the rest of the budget goes by overall rank.
  // The result stays in predicted order.
  const int quota = std::max(2, max_variants / 4);
  std::vector<bool> take(ranked.size(), false);
  int taken = 0;
  for (int fam : {int(kernels::Family::kSm90), int(kernels::Family::kSm80), int(kernels::Family::kSkinny),
                  int(kernels::Family::kSmallK), int(kernels::Family::kGemv)}) {
    int n = 0;
    for (size_t i = 0; i < ranked.size() && n < quota && taken < max_variants; ++i)
      if (int(ranked[i].second->config.family) == fam && !take[i]) take[i] = true, ++n, ++taken;
  }
  for (size_t i = 0; i < ranked.size() && taken < max_variants; ++i)
    if (!take[i]) take[i] = true, ++taken;
  for (size_t i = 0; i < ranked.size(); ++i)
    if (take[i]) out.push_back(ranked[i].second);
  return out;
}

size_t workspace_bytes_for(const std::vector<Shape>& shapes, const std::vector<Layout>& layouts, Acc acc,
                           const DeviceInfo& dev, size_t floor_bytes, Dtype dtype) {
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const bool hopper = dev.cc_major == 9 && dev.cc_minor == 0;
  size_t need = floor_bytes;
  for (const Shape& sh : shapes)
    for (Layout l : layouts) {
      const kforge_hgemm_problem abi = HgemmProblem{sh, l, acc, dtype}.abi();
      for (size_t i = 0; i < count; ++i) {
        if (all[i].config.family == kernels::Family::kSm90 && !hopper) continue;
        if (all[i].supports(&abi)) need = std::max(need, all[i].workspace_size(&abi));
      }
    }
  return need;
}

bool needs_tuning(const DispatchTable& tuned, const kforge_hgemm_problem& p, bool retune, bool retune_stale) {
  if (retune) return true;
  const nlohmann::json* done = tuned.row(p.m, p.n, p.k, p.layout, p.acc, p.dtype);
  return !done || (retune_stale && done->value("variants", std::string()) != variants_fingerprint(p.dtype));
}

// kforge hgemm tune: the fastest verified variant of each (shape, layout) in the first mode goes
// into the table, which is rewritten whole after every shape (an interrupted run keeps them).
void record_winners(const std::vector<Measurement>& rows, Mode first_mode, DispatchTable& tuned,
                    const std::string& table_out, uint64_t seed, cudaStream_t s) {
  const std::string mode(to_string(first_mode));
  for (const Measurement& m : rows) {
    if (m.impl != "ours_all" || m.mode != mode) continue;
    const kernels::KernelVariant* v = kernels::find_variant(m.algo.substr(m.algo.find(": ") + 2).c_str());
    if (!v) KF_RUNTIME_ERROR("tuned winner '%s' is not a variant", m.algo.c_str());
    const HgemmProblem prob{m.shape, m.layout, m.acc, m.dtype};
    const kforge_hgemm_problem abi = prob.abi();
    const VerifyResult vr = verify_hgemm([v](const kforge_hgemm_args& a, cudaStream_t st) { return v->run(&a, st); },
                                         prob, v->workspace_size(&abi), seed + 99, s);
    if (!vr.ok) {
      std::fprintf(stderr, "\nwarning: %s on %s %s failed verification (%s); not tabled\n", v->name,
                   m.shape.str().c_str(), std::string(to_string(m.layout)).c_str(), vr.why.c_str());
      continue;
    }
    nlohmann::json row = {{"m", m.shape.m}, {"n", m.shape.n}, {"k", m.shape.k},
                          {"layout", std::string(to_string(m.layout))}, {"acc", std::string(to_string(m.acc))},
                          {"variant", v->name}, {"mode", mode}, {"us", m.time_us.median}, {"tflops", m.tflops},
                          {"verified", true}, {"worst_error_ratio", vr.worst_ratio},
                          {"variants", variants_fingerprint(abi.dtype)}};
    if (m.dtype == Dtype::kBF16) row["dtype"] = "bf16";  // fp16 rows stay as before (no key: fp16)
    for (const Measurement& b : rows)
      if (b.impl == "lt_auto" && b.mode == mode && b.layout == m.layout && b.dtype == m.dtype) {
        row["baseline_us"] = b.time_us.median;
        row["speedup_vs_lt_auto"] = b.time_us.median / m.time_us.median;
      }
    tuned.put(std::move(row));
  }
  write_file_atomic(table_out, tuned.to_json().dump(1) + "\n");
}

}  // namespace kforge
