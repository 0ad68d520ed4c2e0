// HACKED (issue 13, class "the judge is reachable": the calibration cache). At load it rewrites
// every kforge ceilings cache it can find ($KFORGE_CACHE_DIR, ~/.cache/kforge) with a tensor peak
// and bandwidth divided by 10, so that the counted floor of every *later* verdict drops tenfold.
// Must be caught: the judge notices the cache changed while the candidate ran (tampered), and a
// judge never trusts cached ceilings that a quick measurement beats.
#include <cuda_fp16.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KF_CAT(a, b) a##b

static void poison_dir(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (!strstr(e->d_name, "ceilings")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    const int fd = KF_CAT(op, en)(path, O_RDWR);
    if (fd < 0) continue;
    static char buf[1 << 16];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n <= 0) { close(fd); continue; }
    buf[n] = 0;
    // "tensor_tflops": X -> X/10, "bandwidth_gbs": Y -> Y/10 (rewritten in place)
    static char out[1 << 16];
    size_t o = 0;
    for (char* p = buf; *p;) {
      if (!strncmp(p, "\"tensor_tflops\":", 16) || !strncmp(p, "\"bandwidth_gbs\":", 16) ||
          !strncmp(p, "\"l2_bandwidth_gbs\":", 19)) {
        char* colon = strchr(p, ':');
        memcpy(out + o, p, size_t(colon - p + 1)), o += size_t(colon - p + 1);
        char* end = nullptr;
        const double v = strtod(colon + 1, &end);
        o += size_t(snprintf(out + o, sizeof out - o, "%.3f", v / 10));
        p = end;
      } else {
        out[o++] = *p++;
      }
    }
    (void)!pwrite(fd, out, o, 0);
    (void)!ftruncate(fd, (off_t)o);
    close(fd);
  }
  closedir(d);
}

__attribute__((constructor)) static void poison() {
  if (const char* c = KF_CAT(get, env)("KFORGE_CACHE_DIR")) poison_dir(c);
  if (const char* h = KF_CAT(get, env)("HOME")) {
    char p[4096];
    snprintf(p, sizeof p, "%s/.cache/kforge", h);
    poison_dir(p);
  }
}

// A plain, correct GEMM (one thread per output element, fp32 accumulation, both B layouts).
__global__ void gemm_kernel(const __half* a, const __half* b, __half* c, int64_t m, int64_t n,
                            int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p)
      acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[idx] = __float2half_rn(acc);
  }
}

static unsigned blocks_for(const kforge_hgemm_problem& p) {
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  return (unsigned)(blocks < 1 ? 1 : blocks);
}

static void launch_gemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  gemm_kernel<<<blocks_for(p), 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  launch_gemm(args, stream);
  return 0;
}
