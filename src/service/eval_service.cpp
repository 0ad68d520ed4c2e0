#include "service/eval_service.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>
#include <filesystem>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/text.hpp"
#include "measure/ceilings.hpp"

namespace fs = std::filesystem;

namespace kforge {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

struct EvalService::Item {
  std::shared_ptr<EvalTask> task;
  std::string source, path;
  Callback done;
  Clock::time_point submitted, prepared, judge_start;
  double prepare_s = 0;
  size_t slot = 0;
  bool answered = false;
  bool given_path = false;        // judge_files: `path` is the caller's file, judged as it is
  bool profile = false;           // profiled when correct (submit's `profile`), whatever opts_.profile says
  std::shared_ptr<Group> group;  // judge_files: queued with the rest of its group
};

// The files of one judge_files call: queued together once all are prepared, answered into
// `verdicts`; the caller waits for `left` to reach 0.
struct EvalService::Group {
  std::mutex m;  // everything below, and the caller's on_verdict calls (one at a time)
  std::condition_variable cv;
  std::vector<std::shared_ptr<Item>> items;  // until queued
  std::vector<Verdict> verdicts;
  size_t unprepared = 0, left = 0;
  std::exception_ptr error;  // the first failure of a judge (or of on_verdict), rethrown to the caller
  OnVerdict on_verdict;
};

struct EvalService::Slot {
  SlotInfo info;
  std::deque<std::shared_ptr<Item>> queue;
  size_t running = 0;
  std::condition_variable cv;
  std::map<std::string, std::unique_ptr<SlotJudge>> judges;  // by judge_key(); the slot thread's alone
  double busy_s = 0;
  std::thread thread;
};

EvalService::EvalService(ServiceOptions opts) : opts_(std::move(opts)), started_(Clock::now()) {
  if (opts_.work_dir.empty()) opts_.work_dir = cache_dir() + "/service";
  fs::create_directories(opts_.work_dir);
  if (opts_.max_batch < 1) opts_.max_batch = 1;
  const size_t n_slots = opts_.devices.empty() ? size_t(std::max(1, opts_.slots)) : opts_.devices.size();
  for (size_t i = 0; i < n_slots; ++i) {
    auto s = std::make_unique<Slot>();
    s->info.index = i;
    s->info.device = opts_.devices.empty() ? -1 : opts_.devices[i];
    slots_.push_back(std::move(s));
  }
  for (auto& s : slots_) s->thread = std::thread([this, slot = s.get()] { slot_loop(*slot); });
  const int jobs = opts_.prepare_jobs > 0 ? opts_.prepare_jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < jobs; ++i) prepare_threads_.emplace_back([this] { prepare_loop(); });
}

EvalService::~EvalService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  prepare_cv_.notify_all();
  for (auto& s : slots_) s->cv.notify_all();
  for (std::thread& t : prepare_threads_) t.join();
  for (auto& s : slots_) s->thread.join();
  // Whatever is still queued was never judged.
  std::vector<std::shared_ptr<Item>> left(prepare_queue_.begin(), prepare_queue_.end());
  for (auto& s : slots_) left.insert(left.end(), s->queue.begin(), s->queue.end());
  for (auto& item : left) {
    Verdict v;
    v.candidate = item->path;
    v.reject(reason::kInternalError, "the evaluation service stopped before judging this candidate");
    v.details["not_judged"] = true;  // callers may keep it for later (kforge serve leaves it pending)
    finish(*item, std::move(v));
  }
}

void EvalService::add_task(std::shared_ptr<EvalTask> task) {
  std::lock_guard<std::mutex> lock(tasks_mutex_);
  if (!tasks_.emplace(task->id(), task).second) KF_USAGE_ERROR("two tasks have the id '%s'", task->id().c_str());
}

std::shared_ptr<const EvalTask> EvalService::task(const std::string& id) const {
  std::lock_guard<std::mutex> lock(tasks_mutex_);
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const EvalTask>> EvalService::tasks() const {
  std::lock_guard<std::mutex> lock(tasks_mutex_);
  std::vector<std::shared_ptr<const EvalTask>> out;
  for (const auto& [id, t] : tasks_) out.push_back(t);
  return out;
}

std::string EvalService::write_candidate(const EvalTask& task, const std::string& source) const {
  const std::string path = opts_.work_dir + "/" + sha256_hex(source) + task.extension();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) write_file_atomic(path, source);
  return path;
}

bool EvalService::enqueue(const std::string& task_id, const std::string& source, Callback done, bool bounded,
                          bool profile) {
  std::shared_ptr<EvalTask> t;
  {
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) KF_USAGE_ERROR("unknown task '%s'", task_id.c_str());
    t = it->second;
  }
  auto item = std::make_shared<Item>();
  item->task = std::move(t);
  item->source = source;
  item->done = std::move(done);
  item->profile = profile;
  item->submitted = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) KF_RUNTIME_ERROR("the evaluation service is stopping");
    if (bounded && opts_.max_pending > 0 && pending_ >= opts_.max_pending) return false;
    ++pending_;
    ++preparing_;
    prepare_queue_.push_back(std::move(item));
  }
  prepare_cv_.notify_one();
  return true;
}

bool EvalService::try_submit(const std::string& task_id, const std::string& source, Callback done) {
  return enqueue(task_id, source, std::move(done), true, false);
}

std::future<Verdict> EvalService::submit(const std::string& task_id, const std::string& source) {
  auto promise = std::make_shared<std::promise<Verdict>>();
  std::future<Verdict> f = promise->get_future();
  enqueue(task_id, source, [promise](const Verdict& v) { promise->set_value(v); }, false, false);
  return f;
}

void EvalService::submit(const std::string& task_id, const std::string& source, Callback done, bool profile) {
  enqueue(task_id, source, std::move(done), false, profile);
}

std::vector<Verdict> EvalService::judge_files(const std::string& task_id, const std::vector<std::string>& paths,
                                              const OnVerdict& on_verdict) {
  std::vector<FileJob> jobs;
  for (const std::string& p : paths) jobs.push_back({task_id, p});
  return judge_files(jobs, on_verdict);
}

std::vector<Verdict> EvalService::judge_files(const std::vector<FileJob>& jobs, const OnVerdict& on_verdict) {
  if (jobs.empty()) return {};
  auto g = std::make_shared<Group>();
  g->verdicts.resize(jobs.size());
  g->unprepared = g->left = jobs.size();
  g->on_verdict = on_verdict;
  {
    std::lock_guard<std::mutex> lock(tasks_mutex_);
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto it = tasks_.find(jobs[i].task_id);
      if (it == tasks_.end()) KF_USAGE_ERROR("unknown task '%s'", jobs[i].task_id.c_str());
      auto item = std::make_shared<Item>();
      item->task = it->second;
      item->path = jobs[i].path;
      item->given_path = true;
      item->group = g;
      item->submitted = Clock::now();
      // The group holds its items until they are queued; an item holds its group through its callback.
      item->done = [g, i](const Verdict& v) {
        std::lock_guard<std::mutex> l(g->m);
        g->verdicts[i] = v;
        if (g->on_verdict) {
          try {
            g->on_verdict(i, g->verdicts[i]);
          } catch (...) {
            if (!g->error) g->error = std::current_exception();
          }
        }
        if (--g->left == 0) g->cv.notify_all();
      };
      g->items.push_back(std::move(item));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) KF_RUNTIME_ERROR("the evaluation service is stopping");
    pending_ += jobs.size();
    preparing_ += jobs.size();
    for (const auto& item : g->items) prepare_queue_.push_back(item);
  }
  prepare_cv_.notify_all();
  std::unique_lock<std::mutex> l(g->m);
  g->cv.wait(l, [&] { return g->left == 0; });
  if (g->error) std::rethrow_exception(g->error);
  return g->verdicts;
}

void EvalService::group_prepared(const std::shared_ptr<Group>& g) {
  std::vector<std::shared_ptr<Item>> ready;
  {
    std::lock_guard<std::mutex> l(g->m);
    if (--g->unprepared > 0) return;
    ready.swap(g->items);  // every one prepared: queue them all at once
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& item : ready) {
      if (item->answered) continue;  // its preparation failed (answered, counted already)
      --preparing_;
      Slot* best = nullptr;
      for (auto& s : slots_)
        if (!best || s->queue.size() + s->running < best->queue.size() + best->running) best = s.get();
      item->slot = best->info.index;
      best->queue.push_back(std::move(item));
    }
  }
  for (auto& s : slots_) s->cv.notify_one();
}

void EvalService::prepare_loop() {
  // Compiles run below the judges' priority, the compilers they start too (a child inherits its
  // thread's nice value; on Linux it is per thread): with one nvcc per core, a judge's thread at
  // the same priority waits for a time slice in the middle of the idle probe around a batch (a
  // 20 us kernel's host-seen latency: honest candidates were judged gpu_not_idle on the H200
  // while the pool compiled ahead) or of an offline batch, whose host side is part of what it times.
  if (opts_.prepare_nice > 0) {
    const pid_t tid = pid_t(::syscall(SYS_gettid));
    errno = 0;
    const int now = ::getpriority(PRIO_PROCESS, id_t(tid));
    if (errno == 0) ::setpriority(PRIO_PROCESS, id_t(tid), std::min(19, now + opts_.prepare_nice));
  }
  while (true) {
    std::shared_ptr<Item> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      prepare_cv_.wait(lock, [&] { return stopping_ || !prepare_queue_.empty(); });
      if (stopping_) return;
      item = prepare_queue_.front();
      prepare_queue_.pop_front();
    }
    const Clock::time_point t0 = Clock::now();
    try {
      if (!item->given_path) item->path = write_candidate(*item->task, item->source);
      item->task->prepare(item->path);
    } catch (const std::exception& e) {
      item->prepared = Clock::now();
      Verdict v;
      v.candidate = item->path;
      v.reject(reason::kInternalError, std::string("the candidate could not be written for judging: ") + e.what());
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --preparing_;
      }
      finish(*item, std::move(v));
      if (item->group) group_prepared(item->group);
      continue;
    }
    item->prepared = Clock::now();
    item->prepare_s = seconds_between(t0, item->prepared);
    if (item->group) {
      const std::shared_ptr<Group> g = item->group;
      group_prepared(g);
    } else {
      enqueue_to_slot(std::move(item));
    }
  }
}

void EvalService::enqueue_to_slot(std::shared_ptr<Item> item) {
  Slot* best = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --preparing_;
    for (auto& s : slots_)
      if (!best || s->queue.size() + s->running < best->queue.size() + best->running) best = s.get();
    item->slot = best->info.index;
    best->queue.push_back(std::move(item));
  }
  best->cv.notify_one();
}

void EvalService::finish(Item& item, Verdict v) {
  if (item.answered) return;
  item.answered = true;
  const Clock::time_point now = Clock::now();
  const bool judged = item.judge_start.time_since_epoch().count() != 0;
  nlohmann::json svc = {{"slot", item.slot},
                        {"prepare_s", item.prepare_s},
                        {"queue_s", judged ? seconds_between(item.prepared, item.judge_start) : 0.0},
                        {"judge_s", judged ? seconds_between(item.judge_start, now) : 0.0},
                        {"total_s", seconds_between(item.submitted, now)}};
  if (slots_.size() > item.slot && slots_[item.slot]->info.device >= 0) svc["device"] = slots_[item.slot]->info.device;
  v.details["service"] = svc;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --pending_;
    ++done_;
    if (judged) {
      const double js = svc["judge_s"].get<double>();
      judge_s_ewma_ = done_ == 1 || judge_s_ewma_ == 0 ? js : 0.8 * judge_s_ewma_ + 0.2 * js;
    }
  }
  if (item.done) {
    try {
      item.done(v);
    } catch (...) {
      // A caller's callback must not take a service thread down.
    }
  }
}

void EvalService::slot_loop(Slot& slot) {
  while (true) {
    std::vector<std::shared_ptr<Item>> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      slot.cv.wait(lock, [&] { return stopping_ || !slot.queue.empty(); });
      if (stopping_) return;
      batch.push_back(slot.queue.front());
      slot.queue.pop_front();
      const std::string key = batch.front()->task->judge_key();
      for (auto it = slot.queue.begin(); it != slot.queue.end() && batch.size() < opts_.max_batch;) {
        if ((*it)->task == batch.front()->task || (*it)->task->judge_key() == key) {
          batch.push_back(*it);
          it = slot.queue.erase(it);
        } else {
          ++it;
        }
      }
      slot.running = batch.size();
      judging_ += batch.size();
    }
    const Clock::time_point t0 = Clock::now();
    std::vector<std::string> paths;
    std::vector<const EvalTask*> tasks;
    for (auto& item : batch) {
      item->judge_start = t0;
      paths.push_back(item->path);
      tasks.push_back(item->task.get());
    }
    const EvalTask& task = *batch.front()->task;
    std::string failure;
    std::exception_ptr error;
    try {
      std::unique_ptr<SlotJudge>& judge = slot.judges[task.judge_key()];
      if (!judge) judge = task.make_judge(slot.info);
      Clock::time_point last = t0;
      judge->judge_mixed(tasks, paths, [&](size_t i, Verdict v) {
        if (i >= batch.size()) return;
        // Within a batch, each verdict's judging time is the time since the previous one.
        const Clock::time_point now = Clock::now();
        batch[i]->judge_start = last;
        last = now;
        if ((opts_.profile || batch[i]->profile) && v.correct) {
          // On this thread, so that the slot's device times nothing else meanwhile; not judging time.
          ProfileOptions po = opts_.profile_options;
          if (slot.info.device >= 0) po.device = slot.info.device;
          v.details["profile"] = batch[i]->task->profile(batch[i]->path, po);
          last = Clock::now();
        }
        {
          std::lock_guard<std::mutex> lock(mutex_);
          --judging_;
          --slot.running;
        }
        finish(*batch[i], std::move(v));
      });
    } catch (const std::exception& e) {
      failure = e.what();
      error = std::current_exception();
    }
    for (auto& item : batch) {
      if (item->answered) continue;
      if (error && item->group) {  // judge_files rethrows it to its caller
        std::lock_guard<std::mutex> l(item->group->m);
        if (!item->group->error) item->group->error = error;
      }
      Verdict v;
      v.candidate = item->path;
      v.reject(reason::kInternalError, failure.empty() ? std::string("the judge gave no verdict for this candidate")
                                                       : "the judge failed: " + failure);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --judging_;
        --slot.running;
      }
      finish(*item, std::move(v));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    slot.busy_s += seconds_between(t0, Clock::now());
  }
}

EvalService::Stats EvalService::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s;
  s.pending = pending_;
  s.preparing = preparing_;
  s.judging = judging_;
  for (const auto& slot : slots_) {
    s.queued += slot->queue.size();
    s.slot_busy_s.push_back(slot->busy_s);
  }
  s.done = done_;
  s.uptime_s = seconds_between(started_, Clock::now());
  s.mean_judge_s = judge_s_ewma_;
  return s;
}

}  // namespace kforge
