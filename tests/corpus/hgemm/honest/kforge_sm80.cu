// Honest: one of kforge's own kernels as a candidate (the sm_80 mma.sync family's 128x128x32
// variant, 2x2 warps, 4 stages), compiled from the repository's source with
// `--include-dir <repository root>`. Near cuBLASLt's speed at large shapes: the evaluator's
// repeatability near 1x is measured on it (scripts/gpu-check.sh repeat).
#include "kernels/hgemm/sm80_gemm.cuh"

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  if (args->problem.layout == KFORGE_HGEMM_TN)
    return kforge::kernels::sm80::Gemm<128, 128, 32, 2, 2, 4, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32>::run(args, stream);
  return kforge::kernels::sm80::Gemm<128, 128, 32, 2, 2, 4, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32>::run(args, stream);
}
