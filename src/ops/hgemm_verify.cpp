// verify_hgemm on the judge's own checks (eval/hgemm_checks.hpp): an arena of one slot, the four
// input distributions in turn, every call read by judge_call and checked in full once more, then
// the normal inputs again for determinism.
#include "ops/hgemm_verify.hpp"

#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "eval/arena.hpp"
#include "eval/hgemm_checks.hpp"
#include "eval/judge_kernels.hpp"
#include "gpu/cuda.hpp"

namespace kforge {

VerifyResult verify_hgemm(const HgemmImpl& impl, const HgemmProblem& p, size_t ws_bytes, uint64_t seed,
                          cudaStream_t s) {
  VerifyResult r;
  const Shape& sh = p.shape;
  const ArenaLayout L =
      make_arena_layout(sh.m, sh.n, sh.k, int(p.abi().layout), int(p.abi().acc), 1, ws_bytes, int(p.abi().dtype));
  DeviceBuffer arena(L.total, "verify arena"), slot(sizeof(int), "verify slot"), dist(1, "verify dist"),
      checks(sizeof(SlotCheck), "verify checks");
  KF_CUDA(cudaMemsetAsync(slot.get(), 0, sizeof(int), s));
  char* base = arena.as<char>();
  kforge_hgemm_args args{};
  args.problem = p.abi();
  args.a = base + L.a_off;
  args.b = base + L.b_off;
  args.c = base + L.c_off;
  args.workspace = ws_bytes ? base + L.ws_off : nullptr;
  args.workspace_bytes = ws_bytes;

  const bool full = int64_t(elems_c(sh)) <= (int64_t(1) << 25);  // else 4096 fp64 samples
  auto scan = [&]() {
    SlotCheck out;
    arena_check(base, L, slot.as<int>(), 1, kSamplesPerOutput, seed ^ 0x5eed, checks.as<SlotCheck>(), s);
    KF_CUDA(cudaMemcpyAsync(&out, checks.get(), sizeof out, cudaMemcpyDeviceToHost, s));
    KF_CUDA(cudaStreamSynchronize(s));
    return out;
  };
  // One call on fresh `d` inputs (the same ones for the same (seed, d)); false with r.why set on failure.
  auto call = [&](Dist d, const std::string& what, SlotCheck* after_out) -> bool {
    const unsigned char dv = (unsigned char)d;
    KF_CUDA(cudaMemcpyAsync(dist.get(), &dv, 1, cudaMemcpyHostToDevice, s));
    arena_prepare(base, L, slot.as<int>(), dist.as<unsigned char>(), 1, seed, s);
    arena_prepare_workspace(base, L, seed + 1, s);
    const SlotCheck before = scan();
    const int rc = impl(args, s);
    const cudaError_t e = cudaStreamSynchronize(s);
    if (rc != 0) return r.why = strf("returned %d on %s", rc, what.c_str()), false;
    if (e != cudaSuccess) return r.why = strf("CUDA error on %s: %s", what.c_str(), cudaGetErrorString(e)), false;
    const SlotCheck after = scan();
    if (const unsigned long long n = arena_workspace_damage(base, L, s))
      return r.why = strf("%llu guard-band bytes around the workspace changed (%s)", n, what.c_str()), false;
    double worst = 0, full_worst = 0;
    if (const CallFailure f = judge_call(p, d, before, after, false, what, &worst)) return r.why = f.why, false;
    if (const CallFailure f = judge_full_output(p, static_cast<const __half*>(args.a), static_cast<const __half*>(args.b),
                                                static_cast<const __half*>(args.c), full, 4096, seed + 2, false, what,
                                                s, &full_worst))
      return r.why = f.why, false;
    r.worst_ratio = std::max(r.worst_ratio, std::max(worst, full_worst));
    if (after_out) *after_out = after;
    return true;
  };

  SlotCheck first{}, again{};
  for (Dist d : kCheckDists)
    if (!call(d, to_string(d) + " inputs", d == Dist::kNormal ? &first : nullptr)) return r;
  // Determinism: the normal inputs again, the same output bits.
  if (!call(Dist::kNormal, "normal inputs again", &again)) return r;
  if (again.out_hash != first.out_hash) {
    r.why = "two runs on the same inputs gave different outputs (nondeterministic)";
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace kforge
