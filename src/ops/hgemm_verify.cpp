#include "ops/hgemm_verify.hpp"

#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "eval/device_checks.hpp"
#include "gpu/cuda.hpp"

namespace kforge {

VerifyResult verify_hgemm(const HgemmImpl& impl, const HgemmProblem& p, size_t ws_bytes, uint64_t seed,
                          cudaStream_t s) {
  VerifyResult r;
  const Shape& sh = p.shape;
  Guarded a(elems_a(sh) * 2, "verify A"), b(elems_b(sh) * 2, "verify B"), c(elems_c(sh) * 2, "verify C"),
      ws(ws_bytes, "verify workspace");
  for (const Guarded* g : {&a, &b, &c, &ws}) g->arm(s);
  kforge_hgemm_args args{};
  args.problem = p.abi();
  args.a = a.ptr();
  args.b = b.ptr();
  args.c = c.ptr();
  args.workspace = ws_bytes ? ws.ptr() : nullptr;
  args.workspace_bytes = ws_bytes;
  const int64_t mn = int64_t(elems_c(sh));
  const bool full = mn <= (int64_t(1) << 25);

  auto fail = [&](std::string why) {
    r.ok = false;
    r.why = std::move(why);
    return r;
  };
  auto run = [&](const char* what) -> bool {
    const int rc = impl(args, s);
    const cudaError_t e = cudaStreamSynchronize(s);
    if (rc != 0) {
      r.why = strf("returned %d on %s inputs", rc, what);
      return false;
    }
    if (e != cudaSuccess) {
      r.why = strf("CUDA error on %s inputs: %s", what, cudaGetErrorString(e));
      return false;
    }
    return true;
  };

  std::vector<__half> first_out;
  for (Dist d : {Dist::kNormal, Dist::kUniform, Dist::kSmallInt}) {
    const std::string dn = to_string(d);
    fill_random(a.as<__half>(), elems_a(sh), d, seed, s);
    fill_random(b.as<__half>(), elems_b(sh), d, seed + 1, s);
    poison_nan(c.as<__half>(), elems_c(sh), s);
    const uint64_t in_sum = inputs_checksum(a, b, s);
    if (!run(dn.c_str())) return fail(r.why);
    if (inputs_checksum(a, b, s) != in_sum)
      return fail("the inputs changed during the call (" + dn + " inputs)");
    for (const Guarded* g : {&a, &b, &c, &ws})
      if (const uint64_t n = g->damaged(s)) return fail(strf("%llu guard-band bytes changed (%s inputs)", (unsigned long long)n, dn.c_str()));
    const auto* A = a.as<const __half>();
    const auto* B = b.as<const __half>();
    const auto* C = c.as<const __half>();
    const CheckResult cr = full ? check_full_gpu(p, A, B, C, s) : check_sampled_gpu(p, A, B, C, 4096, seed + 2, s);
    r.worst_ratio = std::max(r.worst_ratio, cr.worst_ratio);
    if (!cr.ok()) return fail(cr.describe() + " (" + dn + " inputs)");
    if (d == Dist::kSmallInt && p.acc == Acc::kF32 && mn <= (int64_t(1) << 24)) {
      // Bit-exact: fp32 sums of small-integer products are exact; the output is their fp16 rounding.
      DeviceBuffer ref(size_t(mn) * 4, "verify ref"), abs_sum(size_t(mn) * 4, "verify |ab|");
      reference_gpu_f32(p, A, B, ref.as<float>(), abs_sum.as<float>(), s);
      std::vector<float> hr(static_cast<size_t>(mn));
      std::vector<__half> hc(static_cast<size_t>(mn));
      KF_CUDA(cudaMemcpyAsync(hr.data(), ref.get(), size_t(mn) * 4, cudaMemcpyDeviceToHost, s));
      KF_CUDA(cudaMemcpyAsync(hc.data(), C, size_t(mn) * 2, cudaMemcpyDeviceToHost, s));
      KF_CUDA(cudaStreamSynchronize(s));
      for (int64_t i = 0; i < mn; ++i) {
        const __half want = __float2half_rn(hr[size_t(i)]);
        if (std::memcmp(&want, &hc[size_t(i)], 2) != 0)
          return fail(strf("small-integer inputs: element (%lld,%lld) is %g, the exact result is %g",
                           (long long)(i / sh.n), (long long)(i % sh.n), double(__half2float(hc[size_t(i)])),
                           double(hr[size_t(i)])));
      }
    }
    if (d == Dist::kNormal) {
      first_out.resize(size_t(mn));
      KF_CUDA(cudaMemcpy(first_out.data(), C, size_t(mn) * 2, cudaMemcpyDeviceToHost));
    }
  }
  // Determinism: the normal inputs again, the same bits out.
  fill_random(a.as<__half>(), elems_a(sh), Dist::kNormal, seed, s);
  fill_random(b.as<__half>(), elems_b(sh), Dist::kNormal, seed + 1, s);
  poison_nan(c.as<__half>(), elems_c(sh), s);
  if (!run("repeated normal")) return fail(r.why);
  std::vector<__half> again(static_cast<size_t>(mn));
  KF_CUDA(cudaMemcpy(again.data(), c.ptr(), size_t(mn) * 2, cudaMemcpyDeviceToHost));
  if (std::memcmp(again.data(), first_out.data(), size_t(mn) * 2) != 0)
    return fail("two runs on the same inputs gave different outputs (nondeterministic)");
  r.ok = true;
  return r;
}

}  // namespace kforge
