// Metrics over a task set, in the shape of CUDA-L1's and KernelBench's result tables: per baseline
// the mean, median, quartiles, max and geometric mean of the speed-up, fast_p (the share of ALL
// tasks that are solved and faster than p times the baseline), the success rate, and the
// rejections counted by reason.
//
// A task is solved when any of its candidates is accepted; its speed-up is that of its best
// accepted candidate (by the first baseline). Speed-up statistics are over solved tasks that have
// that baseline (a baseline that could not be prepared for a task is left out, and `timed` says
// how many remain); `mean_all` counts every unsolved task as 1.0 (the reference is used instead).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/verdict.hpp"

namespace kforge {

struct TaskOutcome {
  std::string task;  // the task's id or file
  Verdict verdict;   // one candidate's verdict (several per task allowed)
};

struct BaselineStats {
  std::string baseline;
  int timed = 0;  // solved tasks with a speed-up against this baseline
  double mean = 0, mean_all = 0, median = 0, p25 = 0, p75 = 0, max = 0, geomean = 0;
  std::vector<std::pair<double, double>> fast_p;  // (p, share of all tasks)
};

struct TaskSetMetrics {
  int tasks = 0, candidates = 0, solved = 0;
  double success_rate = 0;                // solved / tasks
  std::map<std::string, int> rejections;  // reason -> candidates rejected with it
  std::vector<BaselineStats> baselines;   // eager, compile, compile_ro, graph first, then any other
  nlohmann::json per_task = nlohmann::json::array();
};

TaskSetMetrics compute_metrics(const std::vector<TaskOutcome>& outcomes, const std::vector<double>& ps = {1.0, 1.5, 2.0});

// One row per baseline: baseline,tasks,solved,success_rate,timed,mean,mean_all,median,p25,p75,max,geomean,fast_1.0,...
std::string metrics_to_csv(const TaskSetMetrics& m);
nlohmann::json metrics_to_json(const TaskSetMetrics& m);
// The same table for people, plus the rejections.
std::string format_metrics(const TaskSetMetrics& m);

}  // namespace kforge
