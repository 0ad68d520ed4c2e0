#include "cli/commands.hpp"

namespace kforge {
namespace {
std::string g_command_line = "kforge";
}

const std::string& command_line() { return g_command_line; }

void set_command_line(int argc, char** argv) {
  g_command_line = "kforge";
  for (int i = 1; i < argc; ++i) g_command_line += " " + std::string(argv[i]);
}

}  // namespace kforge
