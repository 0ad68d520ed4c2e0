// Each kforge command registers itself on the CLI11 app; its callback throws kforge::Error on
// failure and returns normally on success. A command that must end with a particular non-zero
// exit status (doctor finding no GPU, compare finding a bound exceeded) throws ExitStatus.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

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

}  // namespace kforge
