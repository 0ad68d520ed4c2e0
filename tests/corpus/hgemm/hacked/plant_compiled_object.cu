// HACKED (issue 13, class "the judge is reachable": kforge's compile cache). At load it plants a
// shared object in kforge's compile cache under a key of its choosing (a compiled object found
// there under the key of code not yet judged is loaded without the static scan ever seeing what it
// runs), and rewrites an object already cached byte for byte, setting its modification time back
// so that size and mtime look untouched. The GEMM itself is an honest tiled kernel.
// Must be caught: `tampered` (the judge lists the cache before and after the candidate ran, with
// the status-change time that utimensat cannot set back, and tells kforge's own concurrent writes
// from others), and the planted and rewritten files are removed.
#include <cuda_fp16.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kforge/abi/hgemm.h"

#define KF_CAT(a, b) a##b

static void plant(const char* root) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/compile", root);
  KF_CAT(mk, dir)(root, 0755);  // where kforge has not compiled yet, the folder it will use
  KF_CAT(mk, dir)(dir, 0755);
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.so", dir, "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed");
  const int fd = KF_CAT(op, en)(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    (void)!write(fd, "\177ELF", 4);
    close(fd);
  }
  DIR* d = opendir(dir);
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".so") || strstr(e->d_name, "5eed5eed")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size < 64) continue;
    const int f = KF_CAT(op, en)(path, O_RDWR);
    if (f < 0) continue;
    char b;
    if (pread(f, &b, 1, 40) == 1) (void)!pwrite(f, &b, 1, 40);  // the same byte: content unchanged
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    futimens(f, times);  // mtime set back
    close(f);
    break;
  }
  closedir(d);
}

__attribute__((constructor)) static void at_load() {
  if (const char* c = KF_CAT(get, env)("KFORGE_CACHE_DIR")) plant(c);
  if (const char* h = KF_CAT(get, env)("HOME")) {
    char p[4096];
    snprintf(p, sizeof p, "%s/.cache/kforge", h);
    plant(p);
  }
}

// An honest 16x16-tiled GEMM (fp32 accumulation), both layouts.
__global__ void gemm(const __half* A, const __half* B, __half* C, int M, int N, int K, bool tn) {
  __shared__ float As[16][17], Bs[16][17];
  const int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (r < M && ka < K) ? __half2float(A[(size_t)r * K + ka]) : 0.f;
    const int bc = blockIdx.x * 16 + threadIdx.x;
    Bs[threadIdx.y][threadIdx.x] =
        (bc < N && kb < K) ? __half2float(tn ? B[(size_t)bc * K + kb] : B[(size_t)kb * N + bc]) : 0.f;
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (r < M && c < N) C[(size_t)r * N + c] = __float2half(acc);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) {
  const kforge_hgemm_problem& p = a->problem;
  dim3 grid((p.n + 15) / 16, (p.m + 15) / 16), block(16, 16);
  gemm<<<grid, block, 0, s>>>((const __half*)a->a, (const __half*)a->b, (__half*)a->c, p.m, p.n, p.k,
                              p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
