#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "eval/verdict.hpp"

namespace kforge {
namespace {

Summary summary_of(double median, int n = 5) {
  Summary s;
  s.n = n;
  s.median = median;
  s.mean = median * 1.01;
  s.min = median * 0.9;
  s.max = median * 1.2;
  s.p10 = median * 0.95;
  s.p90 = median * 1.1;
  return s;
}

Verdict accepted(double offline_speedup) {
  Verdict v;
  v.candidate = "cand.cu";
  v.correct = true;
  v.speedup["offline"] = summary_of(offline_speedup);
  return v;
}

// ---------------------------------------------------------------------------------------------
// reject / has_reason

TEST(Verdict, RejectKeepsFirstMessageAndEachCodeOnce) {
  Verdict v;
  v.correct = true;
  EXPECT_FALSE(v.has_reason(reason::kSideStream));
  v.reject(reason::kSideStream, "work ran on a stream it created");
  EXPECT_FALSE(v.correct);
  EXPECT_TRUE(v.has_reason(reason::kSideStream));
  EXPECT_EQ(v.message, "work ran on a stream it created");

  v.reject(reason::kWrongResult, "C[3,4] = 7, expected 8");
  v.reject(reason::kSideStream, "again");
  EXPECT_EQ(v.reasons, (std::vector<std::string>{"side_stream", "wrong_result"}));
  EXPECT_EQ(v.message, "work ran on a stream it created");
  EXPECT_TRUE(v.has_reason("wrong_result"));
  EXPECT_FALSE(v.has_reason("timeout"));
}

TEST(Verdict, RejectLeavesAnExistingMessage) {
  Verdict v;
  v.message = "compiled in 3.2 s";
  v.reject(reason::kCompileTimeout, "nvcc ran past 60 s");
  EXPECT_EQ(v.message, "compiled in 3.2 s");
  EXPECT_EQ(v.reasons, (std::vector<std::string>{"compile_timeout"}));
}

// ---------------------------------------------------------------------------------------------
// JSON

TEST(Verdict, JsonRoundTrip) {
  Verdict v = accepted(1.37);
  v.speedup["graph"] = summary_of(1.21, 7);
  v.candidate_us["offline"] = summary_of(812.5);
  v.baseline_us["offline"] = summary_of(1113.1);
  v.flags = {"near_floor"};
  v.message = "1.37x over cuBLASLt";
  v.reward = 0.3148;
  v.details = {{"compile", {{"seconds", 3.5}}}, {"findings", nlohmann::json::array({"x"})}};

  const nlohmann::json j = to_json(v);
  EXPECT_EQ(j["speedup"]["offline"]["n"], 5);
  EXPECT_DOUBLE_EQ(j["speedup"]["graph"]["median"].get<double>(), 1.21);
  for (const char* key : {"n", "median", "mean", "min", "max", "p10", "p90"})
    EXPECT_TRUE(j["candidate_us"]["offline"].contains(key)) << key;

  // Through text, as it travels between processes.
  const Verdict r = verdict_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(r.candidate, "cand.cu");
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.flags, v.flags);
  EXPECT_EQ(r.reasons, v.reasons);
  EXPECT_EQ(r.message, v.message);
  EXPECT_DOUBLE_EQ(r.reward, 0.3148);
  EXPECT_EQ(r.details, v.details);
  ASSERT_EQ(r.speedup.size(), 2u);
  const Summary& g = r.speedup.at("graph");
  EXPECT_EQ(g.n, 7);
  EXPECT_DOUBLE_EQ(g.median, 1.21);
  EXPECT_DOUBLE_EQ(g.mean, 1.21 * 1.01);
  EXPECT_DOUBLE_EQ(g.min, 1.21 * 0.9);
  EXPECT_DOUBLE_EQ(g.max, 1.21 * 1.2);
  EXPECT_DOUBLE_EQ(g.p10, 1.21 * 0.95);
  EXPECT_DOUBLE_EQ(g.p90, 1.21 * 1.1);
  EXPECT_DOUBLE_EQ(r.candidate_us.at("offline").median, 812.5);
  EXPECT_DOUBLE_EQ(r.baseline_us.at("offline").p90, 1113.1 * 1.1);
  EXPECT_EQ(to_json(r), j);
}

TEST(Verdict, JsonRoundTripOfARejection) {
  Verdict v;
  v.candidate = "hack.cu";
  v.reject(reason::kForbiddenCall, "line 3: cudaDeviceSynchronize (device_sync): ...");
  v.reject(reason::kBackgroundThread, "thread count 3 -> 4");
  const Verdict r = verdict_from_json(to_json(v));
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(r.reasons, (std::vector<std::string>{"forbidden_call", "background_thread"}));
  EXPECT_EQ(r.message, v.message);
  EXPECT_TRUE(r.speedup.empty());
  EXPECT_TRUE(r.details.is_object());
}

TEST(Verdict, NonFiniteNumbersSurviveAsNaN) {
  Verdict v = accepted(std::numeric_limits<double>::quiet_NaN());
  const Verdict r = verdict_from_json(nlohmann::json::parse(to_json(v).dump()));
  EXPECT_TRUE(std::isnan(r.speedup.at("offline").median));
}

TEST(Verdict, FromJsonRejectsWrongTypes) {
  const nlohmann::json good = to_json(accepted(2.0));
  for (const auto& [key, bad] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"correct", "yes"},
           {"reasons", "wrong_result"},
           {"reasons", nlohmann::json::array({1, 2})},
           {"speedup", nlohmann::json::array()},
           {"speedup", {{"offline", 1.5}}},
           {"speedup", {{"offline", {{"median", "fast"}}}}},
           {"speedup", {{"offline", {{"n", 2.5}}}}},
           {"message", 3},
           {"reward", "high"},
       }) {
    nlohmann::json j = good;
    j[key] = bad;
    try {
      verdict_from_json(j);
      ADD_FAILURE() << "accepted " << key << " = " << bad.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << e.what();
    }
  }
  EXPECT_THROW(verdict_from_json(nlohmann::json::array()), Error);
  // Missing fields keep their defaults.
  const Verdict d = verdict_from_json(nlohmann::json::object());
  EXPECT_FALSE(d.correct);
  EXPECT_TRUE(d.reasons.empty());
}

// ---------------------------------------------------------------------------------------------
// Reward

// A candidate decides what its file name, its source lines and its printed output hold: one byte
// that is not UTF-8 must not make the verdict's JSON throw (nlohmann's type_error 316), anywhere.
TEST(Verdict, NonUtf8TextNeverBreaksTheJson) {
  Verdict v;
  v.candidate = "caf\xe9.cu";
  v.reject(reason::kForbiddenCall, "line 3: fork (process_creation): fork(); // \xe9t\xe9");
  v.details["output"] = std::string("printed \xff\xfe bytes, then a cut sequence \xe2\x82");
  v.details["findings"] = nlohmann::json::array({{{"text", "\xc0\xaf overlong"}}});
  v.details["\xe9key"] = 1;
  const nlohmann::json j = to_json(v);
  std::string text;
  ASSERT_NO_THROW(text = j.dump(2));  // valid UTF-8 throughout: even the strict dump works
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(j["candidate"], "caf\xef\xbf\xbd.cu");
  EXPECT_EQ(j["details"]["output"], "printed \xef\xbf\xbd\xef\xbf\xbd bytes, then a cut sequence \xef\xbf\xbd\xef\xbf\xbd");
  // ... and it parses back into a verdict.
  const Verdict back = verdict_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(back.reasons, v.reasons);
  EXPECT_EQ(back.message, "line 3: fork (process_creation): fork(); // \xef\xbf\xbdt\xef\xbf\xbd");

  // Raw JSON holding such bytes (a worker's reply, say): dump_json writes U+FFFD instead of throwing.
  nlohmann::json raw = {{"excerpt", "\xe9"}};
  EXPECT_THROW(raw.dump(), nlohmann::json::type_error);
  EXPECT_EQ(dump_json(raw), "{\"excerpt\":\"\xef\xbf\xbd\"}");
  EXPECT_EQ(valid_utf8_json(raw)["excerpt"], "\xef\xbf\xbd");
}

TEST(Text, ValidUtf8) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // été € 😀
  EXPECT_FALSE(is_valid_utf8("\xe9"));                    // Latin-1
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));                // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));            // a UTF-16 surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));        // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));                // cut short
  EXPECT_EQ(valid_utf8("a\xe9" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(valid_utf8("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(valid_utf8(std::string("nul\0ok", 6)), std::string("nul\0ok", 6));
}

TEST(Reward, ParsesEveryKind) {
  RewardConfig c = parse_reward("log");
  EXPECT_EQ(c.kind, "log");
  EXPECT_EQ(c.mode, "offline");
  EXPECT_EQ(parse_reward("speedup").kind, "speedup");
  c = parse_reward("clipped");
  EXPECT_EQ(c.kind, "clipped");
  EXPECT_DOUBLE_EQ(c.clip, 10.0);
  c = parse_reward("clipped:5");
  EXPECT_EQ(c.kind, "clipped");
  EXPECT_DOUBLE_EQ(c.clip, 5.0);
  EXPECT_DOUBLE_EQ(parse_reward("clipped:2.5").clip, 2.5);
}

TEST(Reward, ParseErrorsAreUsageErrors) {
  for (const char* bad : {"", "Log", "linear", "clipped:", "clipped:0", "clipped:-3", "clipped:abc", "clipped:5x",
                          "clipped:inf", "clipped:nan", "log:2", "speedup:3"}) {
    try {
      parse_reward(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
    }
  }
}

TEST(Reward, ComputesEachKindFromTheMedianOfTheMode) {
  Verdict v = accepted(2.0);
  v.speedup["graph"] = summary_of(4.0);
  EXPECT_NEAR(compute_reward(v, parse_reward("log")), std::log(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(compute_reward(v, parse_reward("speedup")), 2.0);
  EXPECT_DOUBLE_EQ(compute_reward(v, parse_reward("clipped:1.5")), 1.5);
  EXPECT_DOUBLE_EQ(compute_reward(v, parse_reward("clipped")), 2.0);

  RewardConfig graph = parse_reward("speedup");
  graph.mode = "graph";
  EXPECT_DOUBLE_EQ(compute_reward(v, graph), 4.0);

  // Slower than the baseline: the log reward is negative.
  EXPECT_NEAR(compute_reward(accepted(0.5), parse_reward("log")), std::log(0.5), 1e-12);
  EXPECT_DOUBLE_EQ(compute_reward(accepted(50.0), parse_reward("clipped")), 10.0);
}

TEST(Reward, FloorWhenIncorrectMissingOrImplausible) {
  Verdict wrong = accepted(3.0);
  wrong.correct = false;
  EXPECT_EQ(compute_reward(wrong, parse_reward("speedup")), kRejectedSpeedupReward);

  Verdict rejected = accepted(3.0);
  rejected.reject(reason::kSideStream, "side stream");
  EXPECT_EQ(compute_reward(rejected, parse_reward("speedup")), kRejectedSpeedupReward);

  RewardConfig server = parse_reward("speedup");
  server.mode = "server";
  EXPECT_EQ(compute_reward(accepted(3.0), server), kRejectedSpeedupReward);

  for (double s : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    for (const char* kind : {"log", "speedup", "clipped"})
      EXPECT_EQ(compute_reward(accepted(s), parse_reward(kind)), rejected_reward(parse_reward(kind))) << kind << " " << s;
  EXPECT_EQ(rejected_reward(parse_reward("speedup")), -1.0);
  EXPECT_EQ(rejected_reward(parse_reward("clipped:3")), -1.0);
  EXPECT_EQ(rejected_reward(parse_reward("log")), kRejectedLogReward);
  EXPECT_EQ(compute_reward(wrong, parse_reward("log")), kRejectedLogReward);
}

// Issue 14 item 4: with --reward log a rejection (reward 0) ranked above a correct candidate at
// 0.628x (reward -0.466). A rejection's reward lies below every correct reward, for every kind.
TEST(Reward, ARejectionRanksBelowEveryCorrectCandidate) {
  Verdict rejected = accepted(5.0);
  rejected.reject(reason::kWrongResult, "wrong");
  for (const char* kind : {"log", "speedup", "clipped", "clipped:0.5", "clipped:1000", "correctness"}) {
    const RewardConfig cfg = parse_reward(kind);
    const double floor = compute_reward(rejected, cfg);
    EXPECT_EQ(floor, rejected_reward(cfg)) << kind;
    for (double s : {1e-300, 1e-9, 1e-4, 0.001, 0.01, 0.628, 1.0, 3.0, 1e6, 1e300})
      EXPECT_LE(floor + 1, compute_reward(accepted(s), cfg)) << kind << " at " << s << "x";
  }
  EXPECT_NEAR(compute_reward(accepted(1e-9), parse_reward("log")), std::log(kLogRewardMinSpeedup), 1e-12);
}

TEST(Reward, BadConfigIsAUsageErrorEvenForIncorrectVerdicts) {
  RewardConfig c;
  c.kind = "exp";
  Verdict wrong;
  for (const Verdict& v : {accepted(2.0), wrong}) {
    try {
      compute_reward(v, c);
      ADD_FAILURE() << "accepted kind 'exp'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    }
  }
  RewardConfig clip0 = parse_reward("clipped");
  clip0.clip = 0;
  EXPECT_THROW(compute_reward(accepted(2.0), clip0), Error);
}

// ---------------------------------------------------------------------------------------------
// Shaped rewards (issue 16 item 2): --deviation-penalty W, --length-penalty W:TOKENS

Verdict accepted_with_deviation(double speedup, double over_bound) {
  Verdict v = accepted(speedup);
  v.details["checks"] = {{"outputs_checked", 12}, {"worst_error_over_bound", over_bound}};
  return v;
}

std::string code_of_tokens(int n) {  // n tokens: "x x x ..."
  std::string s;
  for (int i = 0; i < n; ++i) s += i ? " x" : "x";
  return s;
}

TEST(RewardShaping, TokensAreWordsNumbersAndSinglePunctuationMarks) {
  EXPECT_EQ(count_code_tokens(""), 0);
  EXPECT_EQ(count_code_tokens(" \t\n\r "), 0);
  EXPECT_EQ(count_code_tokens("a->b += 0x1f;"), 8);  // a - > b + = 0x1f ;
  EXPECT_EQ(count_code_tokens("__global__ void k(float* x) { x[threadIdx.x] = 0.5f; }"), 21);  // 0.5f is 0 . 5f
  EXPECT_EQ(count_code_tokens("// a comment counts\n#include <cuda.h>"), 12);
  EXPECT_EQ(count_code_tokens("naïve größe"), 2);  // a UTF-8 word is one token
  EXPECT_EQ(count_code_tokens("a  b\n\n\nc"), count_code_tokens("a b c"));  // white space only separates
  EXPECT_EQ(count_code_tokens(code_of_tokens(1000)), 1000);
}

TEST(RewardShaping, OffByDefaultAndTheSameRewardAsBefore) {
  const RewardConfig cfg = parse_reward("log");
  EXPECT_EQ(cfg.deviation_weight, 0);
  EXPECT_EQ(cfg.length_weight, 0);
  const Verdict v = accepted_with_deviation(2.0, 0.9);
  const std::string code = code_of_tokens(50000);
  const RewardParts p = reward_parts(v, cfg, &code);
  EXPECT_DOUBLE_EQ(p.total, std::log(2.0));
  EXPECT_DOUBLE_EQ(p.speedup_term, std::log(2.0));
  EXPECT_EQ(p.deviation_penalty, 0);
  EXPECT_EQ(p.length_penalty, 0);
  EXPECT_EQ(p.tokens, 50000);         // counted and shown even when not penalised
  EXPECT_DOUBLE_EQ(p.deviation, 0.9);
  EXPECT_FALSE(p.clamped);
  EXPECT_EQ(compute_reward(v, cfg), compute_reward(v, cfg, code));
}

TEST(RewardShaping, DeviationPenaltyIsWTimesTheErrorOverTheBound) {
  RewardConfig cfg = parse_reward("speedup");
  set_reward_penalties(cfg, "0.5", "");
  EXPECT_DOUBLE_EQ(cfg.deviation_weight, 0.5);
  EXPECT_DOUBLE_EQ(compute_reward(accepted_with_deviation(2.0, 0.0), cfg), 2.0);    // exact: no penalty
  EXPECT_DOUBLE_EQ(compute_reward(accepted_with_deviation(2.0, 0.25), cfg), 1.875);
  EXPECT_DOUBLE_EQ(compute_reward(accepted_with_deviation(2.0, 1.0), cfg), 1.5);    // at the bound: W
  // At the same speed, the more accurate candidate ranks higher.
  EXPECT_GT(compute_reward(accepted_with_deviation(1.2, 0.01), cfg), compute_reward(accepted_with_deviation(1.2, 0.6), cfg));
  // The PyTorch judge writes the same statistic (python/kforge_worker/judge.py).
  const RewardParts p = reward_parts(accepted_with_deviation(2.0, 0.25), cfg, nullptr);
  EXPECT_DOUBLE_EQ(p.speedup_term, 2.0);
  EXPECT_DOUBLE_EQ(p.deviation, 0.25);
  EXPECT_DOUBLE_EQ(p.deviation_penalty, 0.125);
  EXPECT_EQ(p.tokens, -1);
  EXPECT_DOUBLE_EQ(p.total, 1.875);
  // A verdict without the statistic (judged before it existed) is not penalised, and says so.
  const RewardParts none = reward_parts(accepted(2.0), cfg, nullptr);
  EXPECT_EQ(none.deviation, -1);
  EXPECT_EQ(none.deviation_penalty, 0);
  EXPECT_TRUE(to_json(none)["deviation"].is_null());
}

TEST(RewardShaping, LengthPenaltyIsWPerBudgetBeyondTheBudget) {
  RewardConfig cfg = parse_reward("log");
  set_reward_penalties(cfg, "", "0.2:1000");
  EXPECT_DOUBLE_EQ(cfg.length_weight, 0.2);
  EXPECT_EQ(cfg.length_budget, 1000);
  const Verdict v = accepted(2.0);
  const double term = std::log(2.0);
  EXPECT_DOUBLE_EQ(compute_reward(v, cfg, code_of_tokens(10)), term);
  EXPECT_DOUBLE_EQ(compute_reward(v, cfg, code_of_tokens(1000)), term);  // at the budget: free
  EXPECT_NEAR(compute_reward(v, cfg, code_of_tokens(1500)), term - 0.1, 1e-12);
  EXPECT_NEAR(compute_reward(v, cfg, code_of_tokens(3000)), term - 0.4, 1e-12);
  const std::string code = code_of_tokens(1500);
  const RewardParts p = reward_parts(v, cfg, &code);
  EXPECT_EQ(p.tokens, 1500);
  EXPECT_NEAR(p.length_penalty, 0.1, 1e-12);
  // Without the source a correct candidate's length cannot be judged: an error, never a free pass.
  EXPECT_THROW(compute_reward(v, cfg), Error);
  // Both penalties add up.
  set_reward_penalties(cfg, "1", "");
  Verdict both = accepted_with_deviation(2.0, 0.5);
  const RewardParts q = reward_parts(both, cfg, &code);
  EXPECT_NEAR(q.total, term - 0.5 - 0.1, 1e-12);
  EXPECT_NEAR(q.total, q.speedup_term - q.deviation_penalty - q.length_penalty, 1e-15);
}

// Penalties never take a correct candidate down to (or below) a rejection: they stop at
// correct_reward_floor() = rejected_reward() + 1, and a rejection stays lowest.
TEST(RewardShaping, ARejectedCandidateStaysLowest) {
  for (const char* kind : {"log", "speedup", "clipped:3"}) {
    RewardConfig cfg = parse_reward(kind);
    set_reward_penalties(cfg, "1000", "1000:10");
    const double floor = rejected_reward(cfg);
    EXPECT_EQ(correct_reward_floor(cfg), floor + 1) << kind;
    const std::string huge = code_of_tokens(100000);
    Verdict rejected = accepted_with_deviation(5.0, 0.0);
    rejected.reject(reason::kWrongResult, "wrong");
    const RewardParts r = reward_parts(rejected, cfg, &huge);
    EXPECT_FALSE(r.correct);
    EXPECT_EQ(r.total, floor) << kind;
    EXPECT_EQ(r.deviation_penalty + r.length_penalty, 0) << kind;  // nothing is taken off a rejection
    for (double s : {1e-9, 0.01, 0.5, 1.0, 3.0, 1e6}) {
      for (double d : {0.0, 0.3, 1.0}) {
        const RewardParts p = reward_parts(accepted_with_deviation(s, d), cfg, &huge);
        EXPECT_GE(p.total, floor + 1) << kind << " " << s << "x, deviation " << d;
        EXPECT_GT(p.total, r.total);
        EXPECT_TRUE(p.clamped) << kind << " " << s;
        EXPECT_EQ(to_json(p)["clamped"], true);
      }
    }
    // A short exact candidate is not clamped, and its reward is its speed-up term.
    const std::string tiny = code_of_tokens(5);
    const RewardParts fine = reward_parts(accepted_with_deviation(2.0, 0.0), cfg, &tiny);
    EXPECT_FALSE(fine.clamped) << kind;
    EXPECT_EQ(fine.total, fine.speedup_term) << kind;
  }
}

TEST(RewardShaping, ApplyRewardStoresThePartsInTheVerdict) {
  RewardConfig cfg = parse_reward("log");
  set_reward_penalties(cfg, "0.5", "1:100");
  Verdict v = accepted_with_deviation(2.0, 0.5);
  const std::string code = code_of_tokens(150);
  apply_reward(v, cfg, &code);
  const nlohmann::json& r = v.details.at("reward");
  EXPECT_DOUBLE_EQ(r.at("speedup_term").get<double>(), std::log(2.0));
  EXPECT_DOUBLE_EQ(r.at("deviation").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r.at("deviation_penalty").get<double>(), 0.25);
  EXPECT_EQ(r.at("tokens").get<long long>(), 150);
  EXPECT_DOUBLE_EQ(r.at("length_penalty").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r.at("total").get<double>(), v.reward);
  EXPECT_NEAR(v.reward, std::log(2.0) - 0.75, 1e-12);
  EXPECT_EQ(r.at("correct"), true);
  // They survive the verdict's JSON form (the run database, --out, serve's store).
  EXPECT_EQ(verdict_from_json(to_json(v)).details.at("reward"), r);
}

TEST(RewardShaping, BadValuesAreUsageErrorsNamingTheFlagAndTheFix) {
  for (const char* bad : {"-1", "-0.5", "nan", "NaN", "inf", "-inf", "1e400", "abc", "1.5x", " ", "0x"}) {
    RewardConfig cfg;
    try {
      set_reward_penalties(cfg, bad, "");
      ADD_FAILURE() << "accepted --deviation-penalty '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
      const std::string m = e.what();
      EXPECT_NE(m.find("--deviation-penalty"), std::string::npos) << m;
      EXPECT_NE(m.find("e.g. --deviation-penalty 0.1"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  for (const char* bad : {"0.5", "0.5:", ":100", "-1:100", "nan:100", "inf:100", "0.5:0", "0.5:-3", "0.5:1.5",
                          "0.5:abc", "0.5:100:7", "0.5:1e3", "0.5:99999999999999999999999", "x:y"}) {
    RewardConfig cfg;
    try {
      set_reward_penalties(cfg, "", bad);
      ADD_FAILURE() << "accepted --length-penalty '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
      const std::string m = e.what();
      EXPECT_NE(m.find("--length-penalty"), std::string::npos) << m;
      EXPECT_NE(m.find("W:TOKENS"), std::string::npos) << m;
      EXPECT_NE(m.find("e.g. --length-penalty 0.5:2000"), std::string::npos) << m;
    }
  }
  // Good values, with 0 meaning off.
  RewardConfig cfg;
  set_reward_penalties(cfg, "0", "0:1");
  EXPECT_EQ(cfg.deviation_weight, 0);
  EXPECT_EQ(cfg.length_weight, 0);
  set_reward_penalties(cfg, " 2.5 ", "3:4096");
  EXPECT_DOUBLE_EQ(cfg.deviation_weight, 2.5);
  EXPECT_DOUBLE_EQ(cfg.length_weight, 3);
  EXPECT_EQ(cfg.length_budget, 4096);
  // Stored and read back (a run's options, a server's).
  RewardConfig back;
  penalties_from_json(penalties_to_json(cfg), back);
  EXPECT_EQ(back.deviation_weight, 2.5);
  EXPECT_EQ(back.length_weight, 3);
  EXPECT_EQ(back.length_budget, 4096);
  // A hand-made config with a bad weight is refused when used, even for a rejection.
  RewardConfig hand = parse_reward("log");
  hand.deviation_weight = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(compute_reward(Verdict{}, hand), Error);
  hand.deviation_weight = 0;
  hand.length_weight = 1;  // without a budget
  EXPECT_THROW(compute_reward(Verdict{}, hand), Error);
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// CUDA-L1's stage 2: 1 for a correct candidate whatever its speed (timed or not), 0 for a rejection;
// the shaped penalties cannot take a correct candidate down to a rejection's reward.
TEST(Reward, CorrectnessIsOneOrZero) {
  const RewardConfig cfg = parse_reward("correctness");
  EXPECT_EQ(cfg.kind, "correctness");
  EXPECT_EQ(rejected_reward(cfg), 0.0);
  for (double s : {0.01, 1.0, 40.0}) EXPECT_EQ(compute_reward(accepted(s), cfg), 1.0) << s;
  Verdict untimed;
  untimed.correct = true;  // verified, never timed (no speed-up at all)
  EXPECT_EQ(compute_reward(untimed, cfg), 1.0);
  Verdict rejected = accepted(5.0);
  rejected.reject(reason::kWrongResult, "wrong");
  EXPECT_EQ(compute_reward(rejected, cfg), 0.0);
  RewardConfig shaped = cfg;
  set_reward_penalties(shaped, "10", "10:1");
  Verdict v = accepted(2.0);
  const std::string source(4000, 'x');
  apply_reward(v, shaped, &source);
  EXPECT_EQ(v.reward, 1.0);
}

}  // namespace
}  // namespace kforge
