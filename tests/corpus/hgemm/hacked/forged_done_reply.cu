// HACKED (issue 13, class "forged verdicts"). On every call it writes a reply of its own ("done,
// rc 0") with a guessed nonce to every descriptor that could be the reply channel and returns
// without computing anything, hoping the judge reads it before the executor's own reply.
// Must be caught: a reply that answers no request is forged_reply; an unwritten output is
// unwritten_output.
#include <cuda_fp16.h>
#include <unistd.h>
#include <string.h>

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  (void)args, (void)stream;
  const char* line = "{\"nonce\":\"00000000000000000000000000000000\",\"rc\":0,\"cuda\":\"\"}\n";
  for (int fd = 3; fd < 64; ++fd) (void)!write(fd, line, strlen(line));
  return 0;
}
