// The executor: the only kind of process that loads candidate code (and, in its baseline form,
// the only one that runs the baseline being compared with). It holds nothing a verdict depends
// on: it maps the arena a judge shares with it (eval/arena.hpp), runs the calls it is told to on
// the slots it is told to, and answers "done" with the request's nonce. The judge
// (eval/hgemm_worker.cpp) fills the inputs, poisons the outputs, times the whole batch from its own
// process, reads the outputs back and forms the verdict; nothing the executor says is believed
// beyond "you may look now".
//
// Protocol: one JSON request per line on stdin, one reply per line on the descriptor that was
// stdout when the executor started (stdout and stderr are then pointed at the file the judge
// gave as stderr, so nothing a candidate prints reaches the protocol). Every request carries a
// fresh random "nonce"; every reply repeats it.
//   {"op":"hello"}                                    -> {"pid"}
//   {"op":"load", "so"?, "problem":{m,n,k,layout,acc}} -> {"ws_bytes", "description"} or {"error"}
//   {"op":"map", "ipc": hex, "layout": {...}}         -> {} or {"error"}
//   {"op":"run", "mode":"offline|graph|server", "order":[slot,...], "hold_us": H}
//        offline: the calls back to back on the executor's stream, then a device-wide
//                 synchronisation; with H > 0 the stream is held behind a gate for H us after the
//                 calls were enqueued and the outputs counted meanwhile ("escaped": elements
//                 written while nothing on the given stream could run).
//        graph:   the graph captured by "capture" replayed once.
//        server:  each call alone, CUDA events around it ("events_us"; the judge corroborates).
//      -> {"rc": first non-zero return code or 0, "cuda": error name or ""}
//   {"op":"capture", "order":[...]}                   -> {} or {"error"}
//   {"op":"quit"}
#pragma once
#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kforge/abi/hgemm.h"

namespace kforge {

class ExecRunner {
 public:
  virtual ~ExecRunner() = default;
  // Prepares the implementation for `p`; returns an error in words (empty when it is usable).
  virtual std::string load(const nlohmann::json& req, const kforge_hgemm_problem& p, size_t& workspace_bytes,
                           std::string& description) = 0;
  virtual int call(const kforge_hgemm_args& args, cudaStream_t s) = 0;
};

// The executor's main loop; returns the process exit status.
int run_executor(ExecRunner& runner);

// The candidate's sandbox, installed before its code is loaded: no fork, exec, ptrace,
// process_vm_*, new sessions or process groups, signals to other processes; threads remain
// allowed (the CUDA runtime needs them; the judge counts them). False where unsupported.
bool install_candidate_sandbox(std::string& why_not);

// The executor program for candidates (kforge-executor); `argv` as main's.
int candidate_executor_main(int argc, char** argv);
// `kforge-executor profile ...`: one candidate run for a profiler (eval/profile_target.cpp; only in
// the kforge-executor program).
int profile_target_main(int argc, char** argv);

}  // namespace kforge
