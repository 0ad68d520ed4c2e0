// Honest: one of kforge's own Hopper kernels as a candidate, the tuned winner at 4096^3 in the
// shipped dispatch table (sm90 128x256, 4 stages, 2 consumer warpgroups, group-M 8, clusters of
// two CTAs multicasting their shared operand tile through TMA), compiled from the repository's
// source with `--include-dir <repository root>`. About as fast as cuBLASLt at 4096^3, so the
// evaluator's repeatability near 1x is measured on it (scripts/gpu-check.sh repeat); the sm_80
// candidate kforge_sm80.cu runs at ~0.4x on an H200.
#include "kernels/hgemm/sm90_gemm.cuh"

template <kforge_hgemm_layout L>
using Kernel = kforge::kernels::sm90::Gemm<128, 256, 4, 2, 1, 8, true, L, KFORGE_HGEMM_ACC_F32, false, 2>;

extern "C" size_t kforge_hgemm_workspace_size(const kforge_hgemm_problem* p) {
  return p->layout == KFORGE_HGEMM_TN ? Kernel<KFORGE_HGEMM_TN>::workspace_size(p)
                                      : Kernel<KFORGE_HGEMM_NN>::workspace_size(p);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  if (args->problem.layout == KFORGE_HGEMM_TN) {
    if (!Kernel<KFORGE_HGEMM_TN>::supports(&args->problem)) return 1;
    return Kernel<KFORGE_HGEMM_TN>::run(args, stream);
  }
  if (!Kernel<KFORGE_HGEMM_NN>::supports(&args->problem)) return 1;
  return Kernel<KFORGE_HGEMM_NN>::run(args, stream);
}
