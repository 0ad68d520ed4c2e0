#include "cli/commands.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/text.hpp"

namespace kforge {
namespace {
namespace fs = std::filesystem;

std::string g_command_line = "kforge";

bool is_numeric_type(const std::string& t) { return t == "INT" || t == "UINT" || t == "FLOAT"; }

// "" when `v` is acceptable for an option of CLI11 type `type`, else why not.
std::string value_problem(const std::string& v, const std::string& type) {
  const std::string t(trim(v));
  if (t.empty()) return "empty value (give a value, or leave the flag out for its default)";
  if (!is_numeric_type(type)) return "";
  const char* s = t.c_str();
  char* end = nullptr;
  errno = 0;
  if (type == "FLOAT") {
    const double d = std::strtod(s, &end);
    if (end == s || *end != '\0') return strf("'%s' is not a number", t.c_str());
    if (!std::isfinite(d)) return strf("'%s' is not a finite number", t.c_str());
    if (d < 0) return strf("'%s' is negative (expected a number >= 0)", t.c_str());
    return "";
  }
  const bool negative = t[0] == '-';
  const size_t first = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  bool digits = first < t.size();
  for (size_t i = first; i < t.size(); ++i) digits = digits && t[i] >= '0' && t[i] <= '9';
  if (!digits) return strf("'%s' is not a whole number", t.c_str());
  if (negative) {
    const long long x = std::strtoll(s, &end, 10);
    if (x != 0) return strf("'%s' is negative (expected a whole number >= 0)", t.c_str());
    return "";
  }
  (void)std::strtoull(s, &end, 10);
  if (errno == ERANGE) return strf("'%s' is too large", t.c_str());
  return "";
}

// The chain of subcommands the parse got to ("kforge hgemm bench") and the deepest one.
const CLI::App* deepest(const CLI::App& app, std::string* path) {
  const CLI::App* at = &app;
  *path = "kforge";
  while (true) {
    const std::vector<CLI::App*> subs = at->get_subcommands();
    if (subs.empty()) break;
    at = subs.back();
    *path += " " + at->get_name();
  }
  return at;
}

std::string command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); }))
    names.push_back(sub->get_name());
  return join(names, ", ");
}

const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* o : app.get_options())
    if (o->check_name(name)) return o;
  return nullptr;
}

std::string times(size_t n) { return n == 2 ? "twice" : std::to_string(n) + " times"; }

}  // namespace

const std::string& command_line() { return g_command_line; }

void set_command_line(int argc, char** argv) {
  g_command_line = "kforge";
  for (int i = 1; i < argc; ++i) g_command_line += " " + std::string(argv[i]);
}

void add_value_checks(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_size_max() <= 0) continue;  // a flag
    const std::string type = o->get_type_name();
    o->check([type](const std::string& v) { return value_problem(v, type); }, "", "");
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) add_value_checks(*sub);
}

std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  std::string path;
  const CLI::App* at = deepest(app, &path);
  const std::string help = strf(" (see `%s --help`)", path.c_str());
  const std::string what = e.what();
  std::smatch m;
  if (what == "A subcommand is required" || what.rfind("Requires at least", 0) == 0) {
    for (const std::string& r : at->remaining())
      if (!r.empty() && r[0] != '-')
        return strf("unknown command '%s' for %s (commands: %s)%s", r.c_str(), path.c_str(),
                    command_names(*at).c_str(), help.c_str());
    return strf("%s needs a command: %s%s", path.c_str(), command_names(*at).c_str(), help.c_str());
  }
  if (std::regex_match(what, m, std::regex(R"((\S+): At Most (\d+) required but received (\d+))"))) {
    const size_t got = std::stoul(m[3]);
    if (m[2] == "1") return strf("%s given %s; give it once%s", m[1].str().c_str(), times(got).c_str(), help.c_str());
    return strf("%s takes at most %s values, got %zu%s", m[1].str().c_str(), m[2].str().c_str(), got, help.c_str());
  }
  if (std::regex_match(what, m, std::regex(R"((\S+): (\d+) required (\S+) missing)")) ||
      std::regex_match(what, m, std::regex(R"((\S+): At least (\d+) required but received (\d+))")))
    return strf("%s needs a value%s", m[1].str().c_str(), help.c_str());
  if (std::regex_match(what, m, std::regex(R"(Expected (exactly|at least) (\d+) arguments to (\S+), got (\d+))")))
    return strf("%s needs %s %s value(s), got %s%s", m[3].str().c_str(), m[1].str().c_str(), m[2].str().c_str(),
                m[4].str().c_str(), help.c_str());
  if (std::regex_match(what, m, std::regex(R"(Could not convert: (\S+) = (.*))"))) {
    const CLI::Option* o = find_option(*at, m[1]);
    const std::string type = o ? o->get_type_name() : "";
    const char* expected = type == "FLOAT"                   ? "a number"
                           : type == "INT" || type == "UINT" ? "a whole number"
                                                             : "a valid value";
    return strf("%s: '%s' is not %s%s", m[1].str().c_str(), m[2].str().c_str(), expected, help.c_str());
  }
  if (std::regex_match(what, m, std::regex(R"(The following arguments? (was|were) not expected: (.*))"))) {
    const std::string args(trim(m[2].str()));
    if (!args.empty() && args[0] == '-')
      return strf("unknown option '%s' for %s%s", args.c_str(), path.c_str(), help.c_str());
    return strf("unexpected argument '%s' for %s%s", args.c_str(), path.c_str(), help.c_str());
  }
  if (std::regex_match(what, m, std::regex(R"((\S+) excludes (\S+))")))
    return strf("%s and %s cannot be given together%s", m[1].str().c_str(), m[2].str().c_str(), help.c_str());
  if (std::regex_match(what, m, std::regex(R"((\S+) requires (\S+))")))
    return strf("%s needs %s%s", m[1].str().c_str(), m[2].str().c_str(), help.c_str());
  if (std::regex_match(what, m, std::regex(R"((\S+) is required)"))) {
    const std::string name = m[1];
    if (name.rfind("--", 0) == 0) return strf("%s is required%s", name.c_str(), help.c_str());
    return strf("missing argument %s (the command needs it)%s", name.c_str(), help.c_str());
  }
  // Our own validators (add_value_checks): "--flag: why".
  std::string line = what;
  for (char& c : line)
    if (c == '\n') c = ' ';
  return line + help;
}

void check_seconds(const char* flag, double s) {
  if (!std::isfinite(s) || s <= 0 || s > kMaxSeconds)
    KF_USAGE_ERROR("%s %g: expected seconds in (0, %.0f] (a week at most)", flag, s, kMaxSeconds);
}

void check_input_file(const char* what, const std::string& path) {
  if (path.empty()) KF_USAGE_ERROR("%s: empty path", what);
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) KF_USAGE_ERROR("%s %s: no such file", what, path.c_str());
  if (fs::is_directory(st)) KF_USAGE_ERROR("%s %s is a folder, not a file", what, path.c_str());
  if (!fs::is_regular_file(st)) KF_USAGE_ERROR("%s %s is not a regular file", what, path.c_str());
  if (::access(path.c_str(), R_OK) != 0) KF_USAGE_ERROR("%s %s cannot be read: %s", what, path.c_str(), std::strerror(errno));
}

void check_output_file(const char* flag, const std::string& path) {
  if (path.empty()) KF_USAGE_ERROR("%s: empty path", flag);
  check_writable(path);
}

void check_writable_folder(const char* flag, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) KF_USAGE_ERROR("%s: folder %s does not exist", flag, dir.c_str());
  std::string probe = (fs::path(dir) / ".kforge-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    const int err = errno;
    const fs::path real = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    KF_USAGE_ERROR("%s: no file can be created in folder %s (%s)", flag, real.empty() ? dir.c_str() : real.c_str(),
                   std::strerror(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string plain_message(const std::string& message) {
  static const std::regex tag(R"(\[json\.exception\.[a-z_]+\.[0-9]+\] ?)");
  return std::regex_replace(message, tag, "");
}

}  // namespace kforge
