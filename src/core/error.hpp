// kforge::Error: the one exception type. It carries the file:line where it was raised and a kind
// that the command line maps to an exit status (usage errors 2, everything else 1).
#pragma once
#include <stdexcept>
#include <string>

namespace kforge {

enum class ErrorKind {
  kUsage,     // the user's input is wrong (bad flag, bad shape, unwritable path)
  kRuntime,   // the environment failed (no GPU, out of memory, a CUDA or library error)
  kInternal,  // a bug in kforge
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, const char* file, int line);
  ErrorKind kind() const { return kind_; }
  // "file.cpp:42" of the place that raised it.
  const std::string& where() const { return where_; }

 private:
  ErrorKind kind_;
  std::string where_;
};

// printf-style formatting into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace kforge

#define KF_THROW(kind, ...) throw ::kforge::Error((kind), ::kforge::strf(__VA_ARGS__), __FILE__, __LINE__)
#define KF_USAGE_ERROR(...) KF_THROW(::kforge::ErrorKind::kUsage, __VA_ARGS__)
#define KF_RUNTIME_ERROR(...) KF_THROW(::kforge::ErrorKind::kRuntime, __VA_ARGS__)
#define KF_CHECK(cond, ...)                                    \
  do {                                                         \
    if (!(cond)) KF_THROW(::kforge::ErrorKind::kInternal, __VA_ARGS__); \
  } while (0)
