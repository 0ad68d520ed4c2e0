// kforge-executor: the process that loads one candidate (see eval/executor.hpp). Started by the
// judge (kforge eval-worker), never by people.
#include "eval/executor.hpp"

int main(int argc, char** argv) { return kforge::candidate_executor_main(argc, argv); }
