// kforge-executor: the process that loads one candidate (see eval/executor.hpp). Started by the
// judge (kforge eval-worker), never by people.
// `kforge-executor profile ...` is the one-shot mode kforge runs under Nsight Compute
// (src/eval/profile_target.cpp).
#include <cstring>

#include "eval/executor.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "profile") == 0) return kforge::profile_target_main(argc, argv);
  return kforge::candidate_executor_main(argc, argv);
}
