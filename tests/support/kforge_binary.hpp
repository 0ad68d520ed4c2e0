// Test support: the kforge binary the tests run. Force-included into every unit test (CMake's
// -include), so KFORGE_BINARY means the same everywhere: the KFORGE_BINARY environment variable
// when set (to run today's tests against another build, e.g. the code before a fix:
// `KFORGE_BINARY=/tmp/kf-old/build/kforge build/kforge_unit_tests --gtest_filter=...`), else the
// kforge this test binary was built with.
#pragma once
#include <cstdlib>

namespace kforge::test {
inline const char* kforge_binary() {
  const char* e = std::getenv("KFORGE_BINARY");
  return e && *e ? e : KFORGE_BUILT_BINARY;
}
}  // namespace kforge::test

#define KFORGE_BINARY (::kforge::test::kforge_binary())
