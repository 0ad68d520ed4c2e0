// run_process: fork + execvp with the child leading its own process group (and session), output
// captured through pipes drained with poll(), a hard time-out that SIGKILLs the whole group.
//
// Thread safety: nothing here touches global state. Every descriptor is created close-on-exec so
// that a child started by another thread at the same moment never inherits (and holds open) our
// pipes, and SIGPIPE is blocked only in the calling thread, only while we feed the child's stdin.
#include "core/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.hpp"

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A pipe with both ends close-on-exec: [0] reads, [1] writes.
bool make_pipe(Fd ends[2], std::string* why) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *why = strf("pipe: %s", std::strerror(errno));
    return false;
  }
  ends[0].reset(fds[0]);
  ends[1].reset(fds[1]);
  return true;
}

// What the child reports through the status pipe when it cannot get as far as exec.
struct ChildFailure {
  int stage;  // kStageChdir or kStageExec
  int err;    // errno
};
constexpr int kStageChdir = 1;
constexpr int kStageExec = 2;

// Runs in the child between fork and exec: only async-signal-safe calls, no allocation.
[[noreturn]] void child_exec(char* const* argv, char* const* envp, const char* cwd, int in_fd, int out_fd,
                             int err_fd, int status_fd, pid_t parent) {
  // A new session makes the child the leader of a new process group whose id is its pid, so the
  // parent can kill it and everything it starts with kill(-pid, ...).
  ::setsid();
  // The new session also puts it out of reach of the terminal's Ctrl-C: it dies with kforge
  // instead (SIGKILL when the thread that started it ends: run_process waits in that thread, so
  // only kforge's death ends it early). Kept across exec. A parent already gone is caught too.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);

  // Undo what the parent's thread may have set up: a blocked signal mask (run_process blocks
  // SIGPIPE while writing) and an ignored SIGPIPE are both inherited across exec.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);

  // dup2 clears close-on-exec on the new descriptor, so these three survive exec.
  ::dup2(in_fd, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);

#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
  // Descriptors some other part of the program opened without close-on-exec would otherwise
  // leak into the child (and could keep someone else's pipe open). Best effort.
  ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
#endif

  ChildFailure failure{};
  if (cwd != nullptr && ::chdir(cwd) != 0) {
    failure = {kStageChdir, errno};
  } else {
    ::execvpe(argv[0], argv, envp);
    failure = {kStageExec, errno};
  }
  // Tell the parent why; the status pipe is closed by a successful exec, so any bytes on it mean
  // failure.
  ssize_t ignored = ::write(status_fd, &failure, sizeof failure);
  (void)ignored;
  ::_exit(127);
}

// Blocks SIGPIPE in the calling thread for its lifetime. A write to a pipe whose reader has gone
// then fails with EPIPE instead of killing the process; the SIGPIPE it raised stays pending and
// is consumed before the old mask comes back (unless one was already pending before, which
// belongs to someone else). The process-wide disposition is never changed.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_mask_);
  }
  ~SigpipeBlock() {
    if (got_epipe_ && !was_pending_) {
      struct timespec zero = {0, 0};
      while (::sigtimedwait(&pipe_set_, nullptr, &zero) == SIGPIPE) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  void saw_epipe() { got_epipe_ = true; }

 private:
  sigset_t pipe_set_, old_mask_;
  bool was_pending_ = false;
  bool got_epipe_ = false;
};

// Appends what can be read from `fd` to `dest`, keeping at most `cap` bytes and dropping the
// rest. Returns false at end of file (or on a read error), true while the pipe stays open.
bool drain(int fd, std::string& dest, size_t cap, bool& truncated) {
  char buf[64 * 1024];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  size_t room = dest.size() < cap ? cap - dest.size() : 0;
  size_t keep = std::min(room, static_cast<size_t>(n));
  dest.append(buf, keep);
  if (keep < static_cast<size_t>(n)) truncated = true;
  return true;
}

// The text glibc's strsignal gives for the common signals; strsignal itself is not guaranteed to
// be thread-safe.
const char* signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "Hangup";
    case SIGINT: return "Interrupt";
    case SIGQUIT: return "Quit";
    case SIGILL: return "Illegal instruction";
    case SIGTRAP: return "Trace/breakpoint trap";
    case SIGABRT: return "Aborted";
    case SIGBUS: return "Bus error";
    case SIGFPE: return "Floating point exception";
    case SIGKILL: return "Killed";
    case SIGUSR1: return "User defined signal 1";
    case SIGSEGV: return "Segmentation fault";
    case SIGUSR2: return "User defined signal 2";
    case SIGPIPE: return "Broken pipe";
    case SIGALRM: return "Alarm clock";
    case SIGTERM: return "Terminated";
    case SIGXCPU: return "CPU time limit exceeded";
    case SIGXFSZ: return "File size limit exceeded";
    case SIGSYS: return "Bad system call";
    default: return nullptr;
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Fills exit_code / term_signal from a waitpid status.
void record_status(ProcessResult& r, int status) {
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.term_signal = WTERMSIG(status);
  }
}

}  // namespace

std::string ProcessResult::describe() const {
  if (!started) return err.empty() ? std::string("could not start") : "could not start: " + err;
  if (timed_out) return strf("timed out after %.1f s", seconds);
  if (term_signal != 0) {
    const char* name = signal_name(term_signal);
    return name ? strf("killed by signal %d (%s)", term_signal, name)
                : strf("killed by signal %d", term_signal);
  }
  return strf("exit code %d", exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opts) {
  KF_CHECK(!argv.empty(), "run_process: empty argv");
  ProcessResult r;
  const Clock::time_point start = Clock::now();

  // Everything the child needs is prepared before fork: after fork in a threaded program the
  // child may only make async-signal-safe calls, which rules out allocating.
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const char* cwd = opts.cwd.empty() ? nullptr : opts.cwd.c_str();
  // The environment: ours, with opts.env replacing entries of the same name.
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& o : opts.env) overridden |= o.compare(0, name.size() + 1, name + "=") == 0;
    if (!overridden) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), opts.env.begin(), opts.env.end());
  std::vector<char*> cenv;
  for (const std::string& e : env_strings) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  Fd in[2], out[2], err[2], status[2];
  std::string why;
  if (!make_pipe(in, &why) || !make_pipe(out, &why) || !make_pipe(err, &why) ||
      !make_pipe(status, &why)) {
    r.err = why;
    r.seconds = seconds_since(start);
    return r;
  }

  const pid_t self = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    r.err = strf("fork: %s", std::strerror(errno));
    r.seconds = seconds_since(start);
    return r;
  }
  if (pid == 0) child_exec(cargv.data(), cenv.data(), cwd, in[0].get(), out[1].get(), err[1].get(), status[1].get(), self);

  // Parent: drop the child's ends so that end-of-file arrives once the child's side closes.
  in[0].reset();
  out[1].reset();
  err[1].reset();
  status[1].reset();

  // The status pipe reaches end-of-file when exec succeeds (close-on-exec) or the child exits.
  ChildFailure failure{};
  size_t got = 0;
  while (got < sizeof failure) {
    ssize_t n = ::read(status[0].get(), reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  status[0].reset();
  if (got > 0) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (got == sizeof failure && failure.stage == kStageChdir) {
      r.err = strf("cannot change to folder '%s': %s", opts.cwd.c_str(), std::strerror(failure.err));
    } else if (got == sizeof failure) {
      r.err = strf("cannot run '%s': %s", argv[0].c_str(), std::strerror(failure.err));
    } else {
      r.err = strf("cannot run '%s'", argv[0].c_str());
    }
    r.seconds = seconds_since(start);
    return r;
  }
  r.started = true;

  // Feed stdin from the poll loop (non-blocking, so a child that never reads cannot stall us).
  size_t in_off = 0;
  if (opts.stdin_data.empty()) {
    in[1].reset();
  } else {
    ::fcntl(in[1].get(), F_SETFL, ::fcntl(in[1].get(), F_GETFL) | O_NONBLOCK);
  }
  SigpipeBlock sigpipe_block;

  const bool has_deadline = opts.timeout_s > 0;
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                  has_deadline ? opts.timeout_s : 0.0));
  // After the group is killed, grandchildren that escaped the group could still hold our pipes;
  // we wait only this much longer for end-of-file.
  Clock::time_point give_up{};
  bool reaped = false;
  int wait_status = 0;
  int idle_ms = 1;

  auto kill_group = [&] {
    r.timed_out = true;
    ::kill(-pid, SIGKILL);  // the whole group (the child and all it started)
    if (!reaped) ::kill(pid, SIGKILL);
    give_up = Clock::now() + std::chrono::milliseconds(200);
  };

  while (true) {
    // Reap the child as soon as it is gone (without blocking).
    if (!reaped) {
      pid_t w = ::waitpid(pid, &wait_status, WNOHANG);
      if (w == pid) reaped = true;
    }
    const bool pipes_open = out[0].open() || err[0].open() || in[1].open();
    if (reaped && !pipes_open) break;

    // Milliseconds until the next thing we must do (-1: nothing but the child can wake us).
    int wait_ms = -1;
    Clock::time_point now = Clock::now();
    if (r.timed_out) {
      if (now >= give_up) break;
      wait_ms = static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(give_up - now).count());
    } else if (has_deadline) {
      if (now >= deadline) {
        kill_group();
        continue;
      }
      wait_ms = static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count());
    }

    if (!pipes_open) {
      // The child closed its output but is still running: poll its status with a short sleep.
      int nap = wait_ms < 0 ? idle_ms : std::min(wait_ms, idle_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(nap));
      idle_ms = std::min(idle_ms * 2, 20);
      continue;
    }

    pollfd fds[3];
    int nfds = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out[0].open()) {
      out_i = nfds;
      fds[nfds++] = {out[0].get(), POLLIN, 0};
    }
    if (err[0].open()) {
      err_i = nfds;
      fds[nfds++] = {err[0].get(), POLLIN, 0};
    }
    if (in[1].open()) {
      in_i = nfds;
      fds[nfds++] = {in[1].get(), POLLOUT, 0};
    }
    // With only stdin left (the child closed its outputs but not its input), wake up now and then
    // to notice the child exiting.
    if (out_i < 0 && err_i < 0) wait_ms = wait_ms < 0 ? 20 : std::min(wait_ms, 20);

    int n = ::poll(fds, static_cast<nfds_t>(nfds), wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      // poll itself failed (should not happen): stop reading and make sure the child ends.
      ::kill(-pid, SIGKILL);
      if (!reaped) ::kill(pid, SIGKILL);
      break;
    }
    if (n == 0) continue;

    if (out_i >= 0 && fds[out_i].revents != 0 &&
        !drain(out[0].get(), r.out, opts.max_output_bytes, r.out_truncated))
      out[0].reset();
    if (err_i >= 0 && fds[err_i].revents != 0 &&
        !drain(err[0].get(), r.err, opts.max_output_bytes, r.err_truncated))
      err[0].reset();
    if (in_i >= 0 && fds[in_i].revents != 0) {
      if (fds[in_i].revents & (POLLERR | POLLHUP)) {
        in[1].reset();  // the child closed its stdin: the rest is not wanted
      } else {
        const size_t chunk = std::min<size_t>(opts.stdin_data.size() - in_off, 64 * 1024);
        ssize_t w = ::write(in[1].get(), opts.stdin_data.data() + in_off, chunk);
        if (w > 0) {
          in_off += static_cast<size_t>(w);
          if (in_off == opts.stdin_data.size()) in[1].reset();
        } else if (w < 0 && errno != EINTR && errno != EAGAIN) {
          if (errno == EPIPE) sigpipe_block.saw_epipe();
          in[1].reset();
        }
      }
    }
  }

  out[0].reset();
  err[0].reset();
  in[1].reset();
  if (!reaped) {
    // Only reached after SIGKILL went to the child, so this wait is short.
    while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
  }
  record_status(r, wait_status);
  if (r.timed_out) {
    // The time-out is the story; the SIGKILL it caused is not the child's own failure.
    r.term_signal = 0;
    r.exit_code = -1;
  }
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace kforge
