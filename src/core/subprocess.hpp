// Running other programs: a new process group per child, a hard time-out that kills the whole
// group, output captured up to a cap.
#pragma once
#include <string>
#include <vector>

namespace kforge {

struct ProcessOptions {
  double timeout_s = 0;               // 0: no time-out
  size_t max_output_bytes = 1 << 20;  // per stream; the rest is read and dropped
  std::string stdin_data;             // written to the child's stdin, then closed
  std::string cwd;                    // empty: inherit
  std::vector<std::string> env;       // "NAME=value" entries that override or extend the environment
};

struct ProcessResult {
  bool started = false;   // false: exec failed (program missing); `err` says why
  int exit_code = -1;     // when it exited normally
  int term_signal = 0;    // when a signal ended it
  bool timed_out = false; // killed by the time-out (its group got SIGKILL)
  std::string out, err;
  bool out_truncated = false, err_truncated = false;
  double seconds = 0;
  bool ok() const { return started && !timed_out && term_signal == 0 && exit_code == 0; }
  // "exit code 2", "killed by signal 11 (Segmentation fault)", "timed out after 5.0 s", ...
  std::string describe() const;
};

// Runs argv[0] (searched on PATH) with the arguments; never throws for the child's failures.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opts = {});

}  // namespace kforge
