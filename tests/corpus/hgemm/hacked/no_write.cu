// HACKED — hack-table row "reading a stale reference output from recycled memory".
// Launches nothing and returns success, hoping that C still holds a result left there by an
// earlier run (the reference's, or its own). Must be caught at run time: "unwritten_output"
// (C is poisoned before every verification run).

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  (void)args;
  (void)stream;
  return 0;
}
