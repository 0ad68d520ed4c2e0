// The baseline executor (kforge eval-baseline): the same executor loop as a candidate's
// (eval/executor.hpp), running cuBLASLt's auto-tuned best instead of candidate code, in a process
// that never loads candidate code. The judge times it exactly as it times a candidate: the same
// requests, the same channel, the same arena, so that neither side is measured differently.
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "baselines/cublas.hpp"
#include "core/text.hpp"
#include "eval/executor.hpp"
#include "eval/hgemm_worker.hpp"
#include "gpu/device.hpp"
#include "measure/stats.hpp"
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
      const auto time_algo = [&](size_t i) {
        return timer.time([&](cudaStream_t s, int64_t) { plan_->run(algos[i].algo, ops, s); }, cfg).per_call_us.median;
      };
      // First every algorithm once; then those within 10% of the best (at most four) again in five
      // interleaved rounds, compared by their medians. One pass of 3 samples chose among five
      // configurations from verdict to verdict at 4096^3 on the H200 (the GPU's clock drifts while
      // the algorithms are timed one after another), and the baseline's median moved with it by
      // up to 5%; the rounds make the choice the same wherever the algorithms really differ.
      std::vector<std::pair<double, size_t>> first;
      for (size_t i = 0; i < algos.size(); ++i)
        if (plan_->run(algos[i].algo, ops, st.get())) first.emplace_back(time_algo(i), i);
      if (first.empty()) return "cuBLASLt ran none of its algorithms for " + p.shape.str();
      std::sort(first.begin(), first.end());
      std::vector<size_t> near;
      for (const auto& [us, i] : first)
        if (us <= 1.10 * first.front().first && near.size() < 4) near.push_back(i);
      size_t best = near.front();
      double best_us = first.front().first;
      // Within 2% of the fastest median the algorithms are not told apart by this timing (at 4096^3
      // the re-timed medians of tiles 24 and 165 were within 1% while the judge's own timing put 165
      // 5% behind), so cuBLASLt's own ranking decides among them: the choice no longer moves with
      // the noise.
      if (near.size() > 1) {
        std::vector<std::vector<double>> rounds(near.size());
        for (int r = 0; r < 5; ++r)
          for (size_t j = 0; j < near.size(); ++j) rounds[j].push_back(time_algo(near[j]));
        std::vector<double> med;
        for (const std::vector<double>& v : rounds) med.push_back(median(v));
        const double fastest = *std::min_element(med.begin(), med.end());
        best = algos.size();
        for (size_t j = 0; j < near.size(); ++j)
          if (med[j] <= 1.02 * fastest && near[j] < best) best = near[j], best_us = med[j];
      }
      algo_ = algos[best].algo;
      st.sync();
      ws = 0;
      desc = strf("cuBLASLt auto-tuned (best of %zu, %zu re-timed, %.2f us, heuristic rank %zu): ", algos.size(),
                  near.size(), best_us, best) +
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
