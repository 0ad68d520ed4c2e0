// The evaluation service: submit(task, source) -> a future verdict (or a callback), thread-safe,
// for any number of callers at once.
//
//   submit ──> prepare pool (compile_jobs threads: the candidate is written to a content-addressed
//              file and compiled into the cache on a CPU core)
//          ──> the queue of one device slot (the least loaded) ──> the slot's thread: batches of
//              queued candidates of one task, judged by the slot's own judge (one Evaluator or
//              TorchEvaluator per slot and kind, so two batches never share a worker)
//          ──> the verdict, with details["service"] = {slot, queue_s, prepare_s, judge_s, total_s}
//
// Several evaluate_batch calls on one evaluator would race on its worker slots; here each slot's
// judges are used by its thread alone. Every task is an EvalTask (service/task.hpp): the service
// never branches on the kind.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eval/verdict.hpp"
#include "service/task.hpp"

namespace kforge {

struct ServiceOptions {
  // One slot per listed device; empty: `slots` slots on the default device of each task's options
  // (several make sense on the CPU only).
  std::vector<int> devices;
  int slots = 1;
  int prepare_jobs = 0;      // threads compiling candidates before they are queued; 0: one per core
  // Added to the nice value of those threads (and so of the compilers they start): compiling
  // ahead on every core must not deschedule a judge in the middle of an idle probe or a timed
  // batch. 0: the process's own priority.
  int prepare_nice = 10;
  size_t max_pending = 0;    // try_submit refuses beyond this many accepted, unfinished candidates; 0: no bound
  size_t max_batch = 8;      // candidates of one task a slot judges in one batch
  std::string work_dir;      // candidate files (<sha256><ext>); empty: $KFORGE_CACHE_DIR/service
  // Every correct verdict gets details["profile"] (EvalTask::profile on the slot's thread, before
  // the verdict is answered and before the slot judges anything else: kforge serve --profile).
  // A submission can ask for it alone (submit's `profile`: kforge serve's per-item "profile").
  bool profile = false;
  ProfileOptions profile_options;
};

class EvalService {
 public:
  using Callback = std::function<void(const Verdict&)>;

  explicit EvalService(ServiceOptions opts);
  // Finishes the batches being judged; candidates still queued get an internal_error verdict
  // with details["not_judged"] = true.
  ~EvalService();
  EvalService(const EvalService&) = delete;
  EvalService& operator=(const EvalService&) = delete;

  // Registers a task (a usage error when its id is taken). Thread-safe.
  void add_task(std::shared_ptr<EvalTask> task);
  std::shared_ptr<const EvalTask> task(const std::string& id) const;  // null when unknown
  std::vector<std::shared_ptr<const EvalTask>> tasks() const;          // in id order

  // Queues `source` for `task_id` (a usage error when unknown); `done` is called once, from a
  // service thread, with the verdict. False (and nothing queued) when max_pending candidates are
  // already accepted and unfinished.
  bool try_submit(const std::string& task_id, const std::string& source, Callback done);
  // The same without a bound: a future, or the callback. `profile`: this candidate's verdict gets
  // details["profile"] when it is correct, as every verdict does with ServiceOptions::profile.
  std::future<Verdict> submit(const std::string& task_id, const std::string& source);
  void submit(const std::string& task_id, const std::string& source, Callback done, bool profile = false);

  // Judges candidate files as they are (each verdict names its path; nothing is copied), all of
  // them together: every file is prepared (compiled) on the pool first, then all are queued at
  // once, spread over the slots, so that each slot judges its share in batches of up to max_batch
  // (one slot and max_batch >= their number: one batch, as one evaluate_batch call of an
  // evaluator). `on_verdict(i, v)` is called once per file as its verdict comes, from service
  // threads, one call at a time. Returns the verdicts in the order given. A judge that fails (it
  // cannot start, or throws) rethrows here, as the evaluators' evaluate_batch does, so kforge eval
  // and optimize report it as they always did. Thread-safe; unknown task ids are usage errors.
  struct FileJob {
    std::string task_id, path;
  };
  using OnVerdict = std::function<void(size_t, const Verdict&)>;
  std::vector<Verdict> judge_files(const std::vector<FileJob>& jobs, const OnVerdict& on_verdict = {});
  std::vector<Verdict> judge_files(const std::string& task_id, const std::vector<std::string>& paths,
                                   const OnVerdict& on_verdict = {});

  struct Stats {
    size_t pending = 0;    // accepted, no verdict yet
    size_t preparing = 0;  // of those, not yet queued for a slot
    size_t queued = 0;     // waiting in slot queues
    size_t judging = 0;    // in batches being judged
    uint64_t done = 0;     // verdicts given
    std::vector<double> slot_busy_s;  // seconds each slot spent judging
    double uptime_s = 0;
    double mean_judge_s = 0;  // per verdict, over the last verdicts (0 before the first)
  };
  Stats stats() const;
  size_t slot_count() const { return slots_.size(); }

 private:
  struct Item;
  struct Slot;
  struct Group;
  void group_prepared(const std::shared_ptr<Group>& group);
  bool enqueue(const std::string& task_id, const std::string& source, Callback done, bool bounded, bool profile);
  void prepare_loop();
  void slot_loop(Slot& slot);
  void enqueue_to_slot(std::shared_ptr<Item> item);
  void finish(Item& item, Verdict v);
  std::string write_candidate(const EvalTask& task, const std::string& source) const;

  ServiceOptions opts_;
  mutable std::mutex tasks_mutex_;
  std::map<std::string, std::shared_ptr<EvalTask>> tasks_;

  mutable std::mutex mutex_;  // the queues and counters below
  std::condition_variable prepare_cv_;
  std::deque<std::shared_ptr<Item>> prepare_queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t pending_ = 0, preparing_ = 0, judging_ = 0;
  uint64_t done_ = 0;
  double judge_s_ewma_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> prepare_threads_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace kforge
