// Test support: run a command line, capture its exit status, stdout and stderr.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace kforge::test {

struct ProcessResult {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string temp_dir() {
  char tmpl[] = "/tmp/kforge-test-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  return d ? d : "/tmp";
}

// Runs `args` (a shell fragment) with the kforge binary prepended.
inline ProcessResult run_kforge(const std::string& args) {
  static const std::string dir = temp_dir();
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string cmd = std::string(KFORGE_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  ProcessResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Runs a shell command line; its stdout, and its exit status in *rc (-1 when it did not exit).
inline std::string run_shell(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return *rc = -1, out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace kforge::test
