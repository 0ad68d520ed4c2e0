#include "torch/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "core/text.hpp"
#include "measure/stats.hpp"

namespace kforge {

namespace {

const std::vector<std::string> kKnownOrder = {"eager", "compile", "compile_ro", "graph"};

std::vector<std::string> baselines_of(const std::vector<TaskOutcome>& outcomes) {
  std::set<std::string> seen;
  for (const TaskOutcome& o : outcomes)
    for (const auto& [b, s] : o.verdict.speedup) seen.insert(b);
  std::vector<std::string> out;
  for (const std::string& b : kKnownOrder)
    if (seen.erase(b)) out.push_back(b);
  out.insert(out.end(), seen.begin(), seen.end());
  return out;
}

bool accepted(const Verdict& v) { return v.correct && v.reasons.empty(); }

std::string fmt(double x) { return std::isfinite(x) ? strf("%.4g", x) : ""; }

std::string p_label(double p) { return strf("fast_%.1f", p); }

}  // namespace

TaskSetMetrics compute_metrics(const std::vector<TaskOutcome>& outcomes, const std::vector<double>& ps) {
  TaskSetMetrics m;
  m.candidates = int(outcomes.size());
  const std::vector<std::string> bases = baselines_of(outcomes);
  const std::string primary = bases.empty() ? "eager" : bases.front();

  // Tasks in order of first appearance; the best accepted verdict of each.
  std::vector<std::string> order;
  std::map<std::string, const Verdict*> best;
  for (const TaskOutcome& o : outcomes) {
    if (!best.count(o.task)) {
      order.push_back(o.task);
      best[o.task] = nullptr;
    }
    for (const std::string& r : o.verdict.reasons) ++m.rejections[r];
    if (!accepted(o.verdict)) continue;
    const Verdict*& b = best[o.task];
    auto speed = [&](const Verdict* v) {
      auto it = v->speedup.find(primary);
      return it == v->speedup.end() ? 0.0 : it->second.median;
    };
    if (!b || speed(&o.verdict) > speed(b)) b = &o.verdict;
  }
  m.tasks = int(order.size());
  for (const std::string& t : order) m.solved += best[t] != nullptr;
  m.success_rate = m.tasks ? double(m.solved) / m.tasks : 0.0;

  for (const std::string& b : bases) {
    BaselineStats s;
    s.baseline = b;
    std::vector<double> xs, all;
    for (const std::string& t : order) {
      const Verdict* v = best[t];
      if (!v) {
        all.push_back(1.0);
        continue;
      }
      auto it = v->speedup.find(b);
      if (it == v->speedup.end() || !std::isfinite(it->second.median) || it->second.median <= 0) continue;
      xs.push_back(it->second.median);
      all.push_back(it->second.median);
    }
    s.timed = int(xs.size());
    if (!xs.empty()) {
      const Summary sum = summarize(xs);
      s.mean = sum.mean;
      s.median = sum.median;
      s.max = sum.max;
      s.p25 = percentile(xs, 0.25);
      s.p75 = percentile(xs, 0.75);
      s.geomean = geomean(xs);
    } else {
      s.mean = s.median = s.max = s.p25 = s.p75 = s.geomean = std::nan("");
    }
    s.mean_all = all.empty() ? std::nan("") : summarize(all).mean;
    for (double p : ps) {
      const long n = std::count_if(xs.begin(), xs.end(), [&](double x) { return x > p; });
      s.fast_p.push_back({p, m.tasks ? double(n) / m.tasks : 0.0});
    }
    m.baselines.push_back(s);
  }

  for (const TaskOutcome& o : outcomes) {
    nlohmann::json sp = nlohmann::json::object();
    for (const auto& [b, s] : o.verdict.speedup) sp[b] = s.median;
    m.per_task.push_back({{"task", o.task},
                          {"candidate", o.verdict.candidate},
                          {"correct", accepted(o.verdict)},
                          {"reasons", o.verdict.reasons},
                          {"speedup", sp},
                          {"best", best[o.task] == &o.verdict}});
  }
  return m;
}

std::string metrics_to_csv(const TaskSetMetrics& m) {
  std::string out = "baseline,tasks,solved,success_rate,timed,mean,mean_all,median,p25,p75,max,geomean";
  if (!m.baselines.empty())
    for (const auto& [p, share] : m.baselines.front().fast_p) {
      out += ',';
      out += p_label(p);
    }
  out += "\n";
  for (const BaselineStats& s : m.baselines) {
    out += strf("%s,%d,%d,%s,%d,%s,%s,%s,%s,%s,%s,%s", s.baseline.c_str(), m.tasks, m.solved, fmt(m.success_rate).c_str(),
                s.timed, fmt(s.mean).c_str(), fmt(s.mean_all).c_str(), fmt(s.median).c_str(), fmt(s.p25).c_str(),
                fmt(s.p75).c_str(), fmt(s.max).c_str(), fmt(s.geomean).c_str());
    for (const auto& [p, share] : s.fast_p) {
      out += ',';
      out += fmt(share);
    }
    out += "\n";
  }
  return out;
}

nlohmann::json metrics_to_json(const TaskSetMetrics& m) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json bases = nlohmann::json::array();
  for (const BaselineStats& s : m.baselines) {
    nlohmann::json fp = nlohmann::json::object();
    for (const auto& [p, share] : s.fast_p) fp[strf("%.1f", p)] = share;
    bases.push_back({{"baseline", s.baseline}, {"timed", s.timed}, {"mean", num(s.mean)}, {"mean_all", num(s.mean_all)},
                     {"median", num(s.median)}, {"p25", num(s.p25)}, {"p75", num(s.p75)}, {"max", num(s.max)},
                     {"geomean", num(s.geomean)}, {"fast_p", fp}});
  }
  return {{"tasks", m.tasks},           {"candidates", m.candidates}, {"solved", m.solved},
          {"success_rate", m.success_rate}, {"rejections", m.rejections}, {"baselines", bases},
          {"per_task", m.per_task}};
}

std::string format_metrics(const TaskSetMetrics& m) {
  std::string out = strf("%d task(s), %d candidate(s); solved %d (%.0f%%)\n", m.tasks, m.candidates, m.solved,
                         100 * m.success_rate);
  out += strf("%-11s %5s %8s %8s %8s %8s %8s %8s %8s", "baseline", "timed", "mean", "mean_all", "median", "p25", "p75",
              "max", "geomean");
  if (!m.baselines.empty())
    for (const auto& [p, share] : m.baselines.front().fast_p) out += strf(" %8s", p_label(p).c_str());
  out += "\n";
  auto x = [](double v) { return std::isfinite(v) ? strf("%7.3fx", v) : std::string("       -"); };
  for (const BaselineStats& s : m.baselines) {
    out += strf("%-11s %5d %8s %8s %8s %8s %8s %8s %8s", s.baseline.c_str(), s.timed, x(s.mean).c_str(),
                x(s.mean_all).c_str(), x(s.median).c_str(), x(s.p25).c_str(), x(s.p75).c_str(), x(s.max).c_str(),
                x(s.geomean).c_str());
    for (const auto& [p, share] : s.fast_p) out += strf(" %7.0f%%", 100 * share);
    out += "\n";
  }
  if (!m.rejections.empty()) {
    out += "rejections:";
    for (const auto& [r, n] : m.rejections) out += strf(" %s %d", r.c_str(), n);
    out += "\n";
  }
  return out;
}

}  // namespace kforge
