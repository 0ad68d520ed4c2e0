// run_process: exit codes, signals, time-outs that take the whole process group down, output caps,
// stdin, start failures, and running from several threads at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/subprocess.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// A private temporary folder, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "kforge_subprocess_XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// True once `pid` no longer runs: it is gone, or only a zombie waiting for its new parent (in a
// container, process 1 may never reap orphans).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

TEST(Subprocess, ExitCodes) {
  ProcessResult ok = run_process({"true"});
  EXPECT_TRUE(ok.started);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.describe(), "exit code 0");

  ProcessResult three = run_process({"sh", "-c", "exit 3"});
  EXPECT_TRUE(three.started);
  EXPECT_FALSE(three.ok());
  EXPECT_EQ(three.exit_code, 3);
  EXPECT_EQ(three.term_signal, 0);
  EXPECT_FALSE(three.timed_out);
  EXPECT_EQ(three.describe(), "exit code 3");
}

TEST(Subprocess, CapturesBothStreams) {
  ProcessResult r = run_process({"sh", "-c", "echo out; echo err >&2"});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.out_truncated);
  EXPECT_FALSE(r.err_truncated);
}

TEST(Subprocess, KilledBySignal) {
  ProcessResult r = run_process({"sh", "-c", "kill -SEGV $$"});
  EXPECT_TRUE(r.started);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.term_signal, SIGSEGV);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.describe(), "killed by signal 11 (Segmentation fault)");
}

TEST(Subprocess, TimeoutKillsTheWholeGroup) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/grandchild.pid";
  ProcessOptions opts;
  opts.timeout_s = 0.5;
  auto t0 = std::chrono::steady_clock::now();
  // The shell starts a background sleep (a grandchild of ours), records its pid, then sleeps too.
  ProcessResult r = run_process({"sh", "-c", "sleep 30 & echo $! > '" + pid_file + "'; sleep 30"}, opts);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_GE(r.seconds, 0.45);
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_LT(wall, 5.0);
  EXPECT_EQ(r.describe().rfind("timed out after", 0), 0u) << r.describe();

  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild) << "the shell did not record its background pid";
  ASSERT_GT(grandchild, 0);
  // SIGKILL is immediate, but the orphan's exit may take a moment to show.
  bool gone = false;
  for (int i = 0; i < 200 && !(gone = process_gone(grandchild)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived the time-out";
}

TEST(Subprocess, TimeoutWhenTheChildClosedItsOutput) {
  ProcessOptions opts;
  opts.timeout_s = 0.3;
  ProcessResult r = run_process({"sh", "-c", "exec >/dev/null 2>&1; sleep 30"}, opts);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5.0);
}

TEST(Subprocess, NoTimeoutWhenFastEnough) {
  ProcessOptions opts;
  opts.timeout_s = 10;
  ProcessResult r = run_process({"sh", "-c", "sleep 0.2; echo done"}, opts);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "done\n");
  EXPECT_GE(r.seconds, 0.19);
  EXPECT_LT(r.seconds, 5.0);
}

TEST(Subprocess, TruncatesStdoutButDrainsTheRest) {
  ProcessOptions opts;
  opts.max_output_bytes = 1000;
  ProcessResult r = run_process({"head", "-c", "3000000", "/dev/zero"}, opts);
  // head finished normally: the parent kept reading (no SIGPIPE, no stall).
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_TRUE(r.out_truncated);
  EXPECT_FALSE(r.err_truncated);
}

TEST(Subprocess, TruncatesStderr) {
  ProcessOptions opts;
  opts.max_output_bytes = 4096;
  ProcessResult r = run_process({"sh", "-c", "head -c 3000000 /dev/zero >&2"}, opts);
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.err.size(), 4096u);
  EXPECT_TRUE(r.err_truncated);
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(r.out_truncated);
}

TEST(Subprocess, LargeOutputOnBothStreamsDoesNotDeadlock) {
  ProcessOptions opts;
  opts.max_output_bytes = 8 << 20;
  opts.timeout_s = 60;
  ProcessResult r = run_process(
      {"sh", "-c", "head -c 3000000 /dev/zero >&2; head -c 3000000 /dev/zero; head -c 5 /dev/zero >&2"},
      opts);
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.out.size(), 3000000u);
  EXPECT_EQ(r.err.size(), 3000005u);
  EXPECT_FALSE(r.out_truncated);
  EXPECT_FALSE(r.err_truncated);
}

TEST(Subprocess, PassesStdin) {
  ProcessOptions opts;
  opts.stdin_data = "hello\nworld\n";
  ProcessResult r = run_process({"cat"}, opts);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, "hello\nworld\n");

  // Larger than any pipe buffer in both directions at once.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  opts.stdin_data = big;
  opts.max_output_bytes = 8 << 20;
  opts.timeout_s = 60;
  ProcessResult r2 = run_process({"cat"}, opts);
  EXPECT_TRUE(r2.ok()) << r2.describe();
  EXPECT_TRUE(r2.out == big) << "got " << r2.out.size() << " bytes";
}

TEST(Subprocess, EmptyStdinIsEndOfFile) {
  ProcessResult r = run_process({"cat"});
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.out.empty());
}

TEST(Subprocess, ChildThatIgnoresStdinDoesNotKillUs) {
  // The child exits without reading: our writes hit a closed pipe (EPIPE). That must neither
  // kill this process with SIGPIPE nor leave SIGPIPE blocked or pending in this thread.
  ProcessOptions opts;
  opts.stdin_data.assign(4 << 20, 'x');
  ProcessResult r = run_process({"sh", "-c", "exit 0"}, opts);
  EXPECT_TRUE(r.ok()) << r.describe();

  sigset_t mask, pending;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, nullptr, &mask), 0);
  EXPECT_FALSE(sigismember(&mask, SIGPIPE));
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
}

TEST(Subprocess, ProgramNotFound) {
  ProcessResult r = run_process({"kforge-no-such-program-xyz", "--flag"});
  EXPECT_FALSE(r.started);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.err.find("kforge-no-such-program-xyz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;
  EXPECT_NE(r.describe().find("could not start"), std::string::npos);

  ProcessResult abs = run_process({"/nonexistent/bin/tool"});
  EXPECT_FALSE(abs.started);
}

TEST(Subprocess, HonoursCwd) {
  TempDir dir;
  ProcessOptions opts;
  opts.cwd = dir.path();
  ProcessResult r = run_process({"pwd", "-P"}, opts);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, fs::canonical(dir.path()).string() + "\n");

  opts.cwd = dir.path() + "/missing";
  ProcessResult bad = run_process({"pwd"}, opts);
  EXPECT_FALSE(bad.started);
  EXPECT_NE(bad.err.find("missing"), std::string::npos) << bad.err;
}

TEST(Subprocess, ChildLeadsItsOwnProcessGroup) {
  // Field 5 of /proc/<pid>/stat is the process group id; the shell's must be its own pid, not ours.
  ProcessResult r = run_process({"sh", "-c", "echo $$ $(cut -d' ' -f5 /proc/$$/stat)"});
  ASSERT_TRUE(r.ok()) << r.describe() << r.err;
  long pid = 0, pgid = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "%ld %ld", &pid, &pgid), 2) << r.out;
  EXPECT_EQ(pid, pgid);
  EXPECT_NE(pgid, static_cast<long>(::getpgrp()));
}

TEST(Subprocess, ManyThreadsAtOnce) {
  constexpr int kThreads = 8;
  std::vector<ProcessResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([i, &results] {
      ProcessOptions opts;
      opts.stdin_data = std::string(100000 + i, 'a' + i);
      opts.timeout_s = 30;
      results[i] = run_process({"cat"}, opts);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].describe();
    EXPECT_EQ(results[i].out, std::string(100000 + i, 'a' + i)) << i;
  }
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

TEST(SubprocessEnv, OverridesAndExtendsTheEnvironment) {
  ProcessOptions o;
  o.env = {"HOME=/kforge-test-home", "KFORGE_TEST_EXTRA=42"};
  ProcessResult r = run_process({"sh", "-c", "echo $HOME:$KFORGE_TEST_EXTRA:${PATH:+path}"}, o);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.out, "/kforge-test-home:42:path\n");
}

}  // namespace
}  // namespace kforge
