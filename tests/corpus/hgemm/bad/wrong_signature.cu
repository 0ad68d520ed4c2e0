// BAD INPUT — the entry point has the wrong type. The ABI header is pre-included
// (-include kforge/abi/hgemm.h), so the conflicting C-linkage declaration is a compile error
// rather than a crash at call time. Expected verdict: rejected with "compile_error".

extern "C" int kforge_hgemm(int size) {
  return size > 0 ? 0 : 1;
}
