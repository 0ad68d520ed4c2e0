#include "core/error.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace kforge {

static std::string basename_of(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}

Error::Error(ErrorKind kind, std::string message, const char* file, int line)
    : std::runtime_error(std::move(message)), kind_(kind),
      where_(basename_of(file) + ":" + std::to_string(line)) {}

std::string strf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

}  // namespace kforge
