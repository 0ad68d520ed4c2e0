// The candidate executor's sandbox and protocol, on the CPU: what a candidate may not do once the
// sandbox is installed (new processes are fatal, leaving the process group and signalling others
// are refused, threads stay allowed), and that the executor program answers with the request's
// nonce (here: that CUDA cannot start, there being no GPU).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "eval/executor.hpp"
#include "eval/worker_process.hpp"

namespace kforge {
namespace {

// Runs `body` in a forked child after installing the sandbox; returns the child's wait status.
template <class F> int in_sandboxed_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::string why;
    if (!install_candidate_sandbox(why)) ::_exit(100);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ExecutorSandbox, ANewProcessIsFatal) {
  const int status = in_sandboxed_child([] {
    const pid_t child = ::fork();  // the sandbox kills this process here
    if (child == 0) ::_exit(0);
    return 3;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGSYS);
}

TEST(ExecutorSandbox, RunningAProgramIsFatal) {
  const int status = in_sandboxed_child([] {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ::execv("/bin/true", argv);
    return 3;
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGSYS);
}

TEST(ExecutorSandbox, ThreadsStayAllowedAndEscapesAreRefused) {
  const pid_t parent = ::getpid();
  const int status = in_sandboxed_child([parent] {
    int ran = 0;
    std::thread t([&] { ran = 1; });
    t.join();
    if (!ran) return 10;
    if (::setsid() != -1 || errno != EPERM) return 11;           // leaving the judge's process group
    if (::setpgid(0, 0) != -1 || errno != EPERM) return 12;
    if (::kill(parent, 0) != -1 || errno != EPERM) return 13;    // signalling another process
    if (::kill(::getpid(), 0) != 0) return 14;                   // itself: allowed
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "check " << WEXITSTATUS(status) << " failed (100: no sandbox)";
}

TEST(ExecutorProgram, AnswersWithTheRequestsNonce) {
  const std::string exe = std::filesystem::path(KFORGE_BINARY).parent_path() / "kforge-executor";
  ASSERT_TRUE(std::filesystem::exists(exe)) << exe;
  WorkerProcess p({exe}, {"CUDA_VISIBLE_DEVICES="}, -1, true);
  ASSERT_TRUE(p.send(R"({"op":"hello","nonce":"n-123"})"));
  std::string line;
  ASSERT_EQ(p.read_line(60, line), WorkerProcess::Read::kLine);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j.value("nonce", ""), "n-123");
  // No GPU visible: CUDA cannot start, and the executor says so instead of a pid.
  EXPECT_TRUE(j.contains("error") || j.contains("pid")) << line;
  ASSERT_TRUE(p.send(R"({"op":"run","nonce":"n-124","order":[0]})"));
  ASSERT_EQ(p.read_line(60, line), WorkerProcess::Read::kLine);
  const nlohmann::json r = nlohmann::json::parse(line);
  EXPECT_EQ(r.value("nonce", ""), "n-124");
  EXPECT_TRUE(r.contains("error")) << "a run before anything is loaded and mapped must be refused: " << line;
  p.send(R"({"op":"quit"})");
  EXPECT_NE(p.wait_exit().find("status 0"), std::string::npos);
}

}  // namespace
}  // namespace kforge
