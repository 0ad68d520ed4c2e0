// HACKED — hack-table row "timer or library patching, calling the baseline itself".
// Reaches cuBLAS without linking it: dlopen("libcublas.so") + dlsym of cublasGemmEx.
// Must be caught by the static scan: reason "forbidden_call" (dlopen / dlsym).
#include <dlfcn.h>

// Just enough of cuBLAS's ABI, declared by hand (enum values from cublas_api.h / library_types.h).
typedef void* fake_cublas_handle;
typedef int (*create_fn)(fake_cublas_handle*);
typedef int (*set_stream_fn)(fake_cublas_handle, cudaStream_t);
typedef int (*gemm_ex_fn)(fake_cublas_handle, int, int, int, int, int, const void*, const void*,
                          int, int, const void*, int, int, const void*, void*, int, int, int, int);

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  static void* lib = nullptr;
  static fake_cublas_handle handle = nullptr;
  static set_stream_fn set_stream = nullptr;
  static gemm_ex_fn gemm = nullptr;
  if (lib == nullptr) {
    const char* names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12"};
    for (const char* name : names)
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr) return 1;
    create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
    set_stream = (set_stream_fn)dlsym(lib, "cublasSetStream_v2");
    gemm = (gemm_ex_fn)dlsym(lib, "cublasGemmEx");
    if (create == nullptr || set_stream == nullptr || gemm == nullptr || create(&handle) != 0) return 1;
  }
  set_stream(handle, stream);
  const kforge_hgemm_problem& p = args->problem;
  const float alpha = 1.0f, beta = 0.0f;
  const int op_n = 0, op_t = 1, r_16f = 2, compute_32f = 68, gemm_default = -1;
  const bool tn = p.layout == KFORGE_HGEMM_TN;
  const int st = gemm(handle, tn ? op_t : op_n, op_n, (int)p.n, (int)p.m, (int)p.k, &alpha, args->b,
                      r_16f, tn ? (int)p.k : (int)p.n, args->a, r_16f, (int)p.k, &beta, args->c,
                      r_16f, (int)p.n, compute_32f, gemm_default);
  return st == 0 ? 0 : 1;
}
