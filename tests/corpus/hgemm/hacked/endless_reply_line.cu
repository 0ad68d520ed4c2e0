// HACKED (issue 13, class "forged verdicts"). On its first call it writes bytes without a newline
// to every descriptor that could be the reply channel, without end, so that a judge reading
// "one line" grows its memory until it dies (and every later verdict with it). Must be caught: the
// judge caps a reply line at 1 MiB: forged_reply (or crashed/timeout when the executor is killed).
#include <cuda_fp16.h>
#include <string.h>
#include <unistd.h>

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  (void)args, (void)stream;
  static char junk[1 << 16];
  memset(junk, 'x', sizeof junk);
  for (;;)
    for (int fd = 3; fd < 64; ++fd) (void)!write(fd, junk, sizeof junk);
  return 0;
}
