#include "eval/worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {

WorkerProcess::WorkerProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env, int stderr_fd,
                             bool die_with_parent) {
  if (argv.empty()) KF_RUNTIME_ERROR("the worker command is empty");
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0)
    KF_RUNTIME_ERROR("cannot create pipes for the eval worker: %s", std::strerror(errno));
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) KF_RUNTIME_ERROR("cannot start the eval worker: %s", std::strerror(errno));
  if (pid_ == 0) {
    ::setsid();  // its own process group: a time-out kills everything it started
    if (die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before the request took effect
    }
    if (stderr_fd >= 0) ::dup2(stderr_fd, 2);
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "kforge: cannot run the eval worker %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  in_ = to_child[1];
  out_ = from_child[0];
}

WorkerProcess::~WorkerProcess() { kill(); }

bool WorkerProcess::send(const std::string& line) {
  std::string data = line + "\n";
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(in_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

WorkerProcess::Read WorkerProcess::read_line(double timeout_s, std::string& line) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return Read::kLine;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Read::kTimeout;
    pollfd p{out_, POLLIN, 0};
    const int r = ::poll(&p, 1, int(std::min<long long>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char chunk[65536];
    const ssize_t n = ::read(out_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Read::kEof;
    buf_.append(chunk, size_t(n));
    if (buf_.size() > max_line_ && buf_.find('\n') == std::string::npos) {
      overlong_ = true;
      buf_.clear();
      return Read::kEof;
    }
  }
}

std::string WorkerProcess::kill() {
  if (pid_ <= 0) return "";
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  return reap();
}

std::string WorkerProcess::wait_exit() {
  if (pid_ <= 0) return "";
  for (int i = 0; i < 100; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) return finish(status);
    ::usleep(10000);
  }
  return kill();
}

std::string WorkerProcess::close_and_wait() {
  if (pid_ <= 0) return "";
  if (in_ >= 0) ::close(in_), in_ = -1;
  return wait_exit();
}

std::string WorkerProcess::reap() {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return finish(status);
}

std::string WorkerProcess::finish(int status) {
  ::kill(-pid_, SIGKILL);  // anything it left behind in its group
  pid_ = -1;
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  in_ = out_ = -1;
  if (WIFSIGNALED(status)) return strf("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status)) return strf("exited with status %d", WEXITSTATUS(status));
  return "ended";
}

}  // namespace kforge
