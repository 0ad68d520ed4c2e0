// Each kforge command registers itself on the CLI11 app; its callback throws kforge::Error on
// failure and returns normally on success. A command that must end with a particular non-zero
// exit status (doctor finding no GPU, compare finding a bound exceeded) throws ExitStatus.
//
// Bad input, whatever the command: exit status 2, one line on stderr naming the problem and the
// fix, and nothing created. Every command validates all of its options (and the files they name)
// in one step before any side effect; the helpers below are that step's shared vocabulary.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kforge {

struct ExitStatus {
  int code;
};

// The command line kforge was started with, as one string (recorded with every run).
const std::string& command_line();
void set_command_line(int argc, char** argv);

void register_doctor(CLI::App& app);
void register_hgemm_bench(CLI::App& hgemm);
void register_hgemm_tune(CLI::App& hgemm);
void register_hgemm_compare(CLI::App& hgemm);
void register_hgemm_variants(CLI::App& hgemm);
void register_hgemm_export(CLI::App& hgemm);
void register_eval(CLI::App& app);
void register_eval_torch(CLI::App& eval);  // kforge eval --task / --tasks (PyTorch tasks)
void register_tasks(CLI::App& app);
void register_optimize(CLI::App& app);
void register_serve(CLI::App& app);  // src/serve/command.cpp
void register_data(CLI::App& app);   // src/data/command.cpp
void register_corpus(CLI::App& app); // src/cli/corpus.cpp (kforge corpus build|search|describe)
void register_profile(CLI::App& app); // src/cli/profile.cpp (kforge profile: Nsight Compute metrics)

// Checks every option of `app` and its subcommands accepts at parse time: no empty values; for
// numeric options (CLI11 type INT, UINT, FLOAT) a whole, finite, non-negative number that fits.
// Called once after every command is registered.
void add_value_checks(CLI::App& app);
// The one line (without "kforge: error: ") that a CLI11 parse error is reported with: plain
// words ("unknown command 'frobnicate' ...", "--samples given twice ..."), naming the command
// whose --help says more. `app` is the top-level app after the failed parse.
std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& e);

// Shared option checks; each throws a usage error naming the flag, the value and the fix.
// A time limit in seconds: finite, > 0 and at most kMaxSeconds (a week).
constexpr double kMaxSeconds = 7 * 24 * 3600.0;
void check_seconds(const char* flag, double seconds);
// A file that must exist and be a readable regular file ("no such file", "is a folder", "is not a
// regular file", "cannot be read").
void check_input_file(const char* what, const std::string& path);
// Writable output files, probed (by creating and removing a file beside each) before any work.
void check_output_file(const char* flag, const std::string& path);
// A folder files can be created in (probed the same way).
void check_writable_folder(const char* flag, const std::string& dir);
// `message` without the "[json.exception.parse_error.101] " tags of nlohmann::json's errors.
std::string plain_message(const std::string& message);

}  // namespace kforge
