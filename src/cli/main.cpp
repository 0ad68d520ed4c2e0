// The kforge command.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "kforge/version.hpp"

int main(int argc, char** argv) {
  kforge::set_command_line(argc, argv);
  CLI::App app{"kforge: makes CUDA kernels faster and proves that the speed-ups are real"};
  app.name("kforge");
  app.set_version_flag("--version", std::string("kforge ") + kforge::kVersion);
  app.require_subcommand(1);
  kforge::register_doctor(app);
  kforge::register_eval(app);
  kforge::register_optimize(app);
  kforge::register_tasks(app);
  kforge::register_serve(app);
  kforge::register_data(app);
  kforge::register_corpus(app);
  kforge::register_profile(app);
  CLI::App* hgemm = app.add_subcommand("hgemm", "Half-precision GEMM: baselines, benchmarks, tuning, export");
  hgemm->require_subcommand(1);
  kforge::register_hgemm_bench(*hgemm);
  kforge::register_hgemm_tune(*hgemm);
  kforge::register_hgemm_compare(*hgemm);
  kforge::register_hgemm_variants(*hgemm);
  kforge::register_hgemm_export(*hgemm);
  kforge::add_value_checks(app);
  // What every command does with bad input, said in every --help.
  const std::function<void(CLI::App&)> footer = [&footer](CLI::App& a) {
    const std::string note =
        "Bad input (an unknown flag, a value out of range, a missing or unwritable file): exit status 2, one line "
        "on stderr naming the problem and the fix, and nothing is created.";
    a.footer(a.get_footer().empty() ? note : a.get_footer() + "\n\n" + note);
    for (CLI::App* sub : a.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); })) footer(*sub);
  };
  footer(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    // Bad command lines are usage errors like any other: exit status 2, one plain line.
    std::fprintf(stderr, "kforge: error: %s\n", kforge::describe_parse_error(app, e).c_str());
    return 2;
  } catch (const kforge::ExitStatus& s) {
    return s.code;
  } catch (const kforge::Error& e) {
    std::fprintf(stderr, "kforge: error: %s\n", kforge::plain_message(e.what()).c_str());
    if (e.kind() == kforge::ErrorKind::kInternal)
      std::fprintf(stderr, "kforge: (internal error raised at %s; please report it)\n", e.where().c_str());
    return e.kind() == kforge::ErrorKind::kUsage ? 2 : 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A file operation no check foresaw: the path and the system's reason, not the library's text.
    std::fprintf(stderr, "kforge: error: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kforge: error: %s\n", kforge::plain_message(e.what()).c_str());
    return 1;
  }
  return 0;
}
