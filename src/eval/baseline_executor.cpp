// The baseline executor (kforge eval-baseline): the same executor loop as a candidate's
// (eval/executor.hpp), running cuBLASLt's auto-tuned best instead of candidate code, in a process
// that never loads candidate code. The judge times it exactly as it times a candidate: the same
// requests, the same channel, the same arena, so that neither side is measured differently.
#include <memory>

#include "baselines/cublas.hpp"
#include "core/text.hpp"
#include "eval/executor.hpp"
#include "eval/hgemm_worker.hpp"
#include "gpu/device.hpp"
#include "measure/timer.hpp"

namespace kforge {
namespace {

class BaselineRunner : public ExecRunner {
 public:
  std::string load(const nlohmann::json&, const kforge_hgemm_problem& abi, size_t& ws, std::string& desc) override {
    try {
      HgemmProblem p;
      p.shape = {abi.m, abi.n, abi.k};
      p.layout = abi.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN;
      p.acc = abi.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32;
      p.dtype = abi.dtype == KFORGE_HGEMM_BF16 ? Dtype::kBF16 : Dtype::kF16;  // cuBLASLt auto-tuned in bf16 too
      handles_ = std::make_unique<CublasHandles>();
      plan_ = std::make_unique<LtPlan>(*handles_, p);
      const auto algos = plan_->heuristics(100);
      if (algos.empty()) return "cuBLASLt offers no algorithm for " + p.shape.str();
      // Auto-tuning on operands of our own (every algorithm the heuristic offers, timed briefly).
      Stream st;
      DeviceBuffer a(elems_a(p.shape) * 2, "baseline A"), b(elems_b(p.shape) * 2, "baseline B"),
          c(elems_c(p.shape) * 2, "baseline C");
      fill_operands(p, a.as<__half>(), b.as<__half>(), Dist::kUniform, 12345, st.get());
      const GemmOperands ops{a.as<__half>(), b.as<__half>(), c.as<__half>()};
      DeviceInfo dev = query_device(0);
      Timer timer(st.get(), dev.l2_bytes, 3);
      TimingConfig cfg;
      cfg.samples = 3;
      size_t best = 0;
      double best_us = 1e300;
      for (size_t i = 0; i < algos.size(); ++i) {
        if (!plan_->run(algos[i].algo, ops, st.get())) continue;
        const double us =
            timer.time([&](cudaStream_t s, int64_t) { plan_->run(algos[i].algo, ops, s); }, cfg).per_call_us.median;
        if (us < best_us) best_us = us, best = i;
      }
      algo_ = algos[best].algo;
      st.sync();
      ws = 0;
      desc = strf("cuBLASLt auto-tuned (best of %zu, %.2f us): ", algos.size(), best_us) +
             describe_algo(algo_, algos[best].workspaceSize);
      tuned_us_ = best_us;
      return "";
    } catch (const std::exception& e) {
      return std::string("the baseline could not be prepared: ") + e.what();
    }
  }
  int call(const kforge_hgemm_args& a, cudaStream_t s) override {
    const GemmOperands ops{static_cast<const __half*>(a.a), static_cast<const __half*>(a.b), static_cast<__half*>(a.c)};
    return plan_->run(algo_, ops, s) ? 0 : 1;
  }

 private:
  std::unique_ptr<CublasHandles> handles_;
  std::unique_ptr<LtPlan> plan_;
  cublasLtMatmulAlgo_t algo_{};
  double tuned_us_ = 0;
};

}  // namespace

int run_baseline_executor() {
  BaselineRunner r;
  return run_executor(r);
}

}  // namespace kforge
