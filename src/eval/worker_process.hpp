// A worker process: requests down a pipe to its stdin, line-delimited replies from its stdout.
// It runs in a process group of its own, so that killing it (after a time-out, a crash, a sticky
// CUDA error) takes everything it started with it. Used by the HGEMM evaluator (the C++
// eval-worker) and the PyTorch evaluator (python/kforge_worker).
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace kforge {

class WorkerProcess {
 public:
  // Starts argv[0] (an absolute path) with the arguments; `env` entries ("NAME=value") are added
  // to the inherited environment. `stderr_fd` >= 0: the worker's stderr goes there.
  // `die_with_parent`: the worker is killed when the thread that started it ends
  // (PR_SET_PDEATHSIG; meant for single-threaded parents such as the judge).
  explicit WorkerProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                         int stderr_fd = -1, bool die_with_parent = false);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Writes one line (a newline is appended); false when the worker is gone.
  bool send(const std::string& line);

  enum class Read { kLine, kEof, kTimeout };
  // One line within `timeout_s`. With a line cap set, more than that many bytes without a newline
  // end the read as kEof with overlong() true (a hostile writer cannot grow this process's memory).
  Read read_line(double timeout_s, std::string& line);
  void set_max_line(size_t bytes) { max_line_ = bytes; }
  bool overlong() const { return overlong_; }

  pid_t pid() const { return pid_; }
  // Kills the whole process group and reaps the worker; describes how it ended.
  std::string kill();
  // Waits for an exiting worker (a second at most, then kills it).
  std::string wait_exit();
  // Ends a worker that reads requests until their end: its input closed, then wait_exit.
  std::string close_and_wait();

 private:
  std::string reap();
  std::string finish(int status);

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buf_;
  size_t max_line_ = size_t(-1);
  bool overlong_ = false;
};

}  // namespace kforge
