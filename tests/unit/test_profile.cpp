// Profiles (issue 16, item 1) without a GPU: ncu's CSV parsed from a fixture in the format ncu
// 2025 prints (tests/profile/ncu-raw-sm90.csv) and from a details page; unknown, missing and
// malformed input never crashing; the missing, refused, timed-out and metric-less ncu paths through
// fake ncu programs; the prompt's table, read back cell by cell from a prompt rendered from a
// stored profile; the program database round trip; kforge serve's result field and its per-item
// "profile" on loopback (fake, missing and refused ncu); and, end to end on the CPU, kforge profile / eval --profile / optimize --profile-top /
// --no-profile with a fake ncu that prints the fixture.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <httplib.h>

#include <chrono>
#include <thread>

#include "../support/process.hpp"
#include "../support/profile_table_check.hpp"
#include "../support/scripted_llm_server.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "db/sqlite.hpp"
#include "eval/profile.hpp"
#include "eval/verdict.hpp"
#include "llm/prompt.hpp"
#include "search/program_db.hpp"
#include "serve/scorer.hpp"
#include "serve/server.hpp"
#include "serve/store.hpp"
#include "service/eval_service.hpp"
#include "service/task.hpp"
#include "torch/torch_eval.hpp"

namespace fs = std::filesystem;

namespace kforge {
namespace {

const std::string kSource = KFORGE_SOURCE_DIR;
const std::string kFixture = kSource + "/tests/profile/ncu-raw-sm90.csv";

// An environment variable set for one scope.
struct ScopedEnv {
  std::string name;
  std::string old;
  bool had = false;
  ScopedEnv(const std::string& n, const std::string& value) : name(n) {
    if (const char* v = std::getenv(n.c_str())) had = true, old = v;
    ::setenv(n.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had)
      ::setenv(name.c_str(), old.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

// A fake ncu: a shell script whose body sees the arguments ncu would get. $LOG is the --log-file
// and $RESULT the target's --result file (the last argument).
std::string fake_ncu(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/ncu";
  std::ofstream f(path);
  f << "#!/bin/sh\n"
       "LOG=''; RESULT=''; prev=''\n"
       "for a in \"$@\"; do\n"
       "  [ \"$prev\" = --log-file ] && LOG=\"$a\"\n"
       "  [ \"$prev\" = --result ] && RESULT=\"$a\"\n"
       "  prev=\"$a\"\n"
       "done\n"
    << body << "\n";
  f.close();
  ::chmod(path.c_str(), 0755);
  return path;
}

// The fake that "profiles": the fixture into the log, the target's result file says ok.
std::string fixture_ncu(const std::string& dir) {
  return fake_ncu(dir, "echo \"$@\" > " + dir + "/args\ncp " + kFixture +
                           " \"$LOG\"\necho '{\"ok\": true}' > \"$RESULT\"\nexit 0");
}

TEST(NcuCsv, RawPageOfNcu2025) {
  const nlohmann::json p = parse_ncu_csv(read_file(kFixture));
  ASSERT_EQ(p["kernels"].size(), 2u) << p.dump(2);
  const nlohmann::json& k = p["kernels"][0];
  // A quoted name holding commas and parentheses stays whole.
  EXPECT_EQ(k["name"], "void kforge::sm90_gemm<128, 256, 64, 4, (kforge::Raster)1>(kforge::GemmParams, const __half *, "
                       "const __half *, __half *)");
  EXPECT_EQ(k["launch"], 0);
  EXPECT_EQ(k["grid"], "(132, 1, 1)");
  EXPECT_EQ(k["block"], "(384, 1, 1)");
  EXPECT_NEAR(k["duration_us"].get<double>(), 1234.56, 1e-9);  // "1,234.56" usecond
  EXPECT_NEAR(k["sm_throughput_pct"].get<double>(), 84.02, 1e-9);
  EXPECT_NEAR(k["dram_throughput_pct"].get<double>(), 12.41, 1e-9);
  EXPECT_NEAR(k["tensor_pipe_pct"].get<double>(), 83.9, 1e-9);  // the larger of hmma and gmma
  EXPECT_NEAR(k["achieved_occupancy_pct"].get<double>(), 18.75, 1e-9);
  EXPECT_EQ(k["registers_per_thread"], 168);
  EXPECT_NEAR(k["shared_mem_per_block_bytes"].get<double>(), 197630, 1e-6);  // 197.63 Kbyte + 0 byte
  EXPECT_NEAR(k["l1_hit_rate_pct"].get<double>(), 2.13, 1e-9);
  EXPECT_NEAR(k["l2_hit_rate_pct"].get<double>(), 71.28, 1e-9);
  // The top three stalls, "selected" (issuing) left out; shares of all stall cycles (7.16).
  ASSERT_EQ(k["stalls"].size(), 3u);
  EXPECT_EQ(k["stalls"][0]["reason"], "sleeping");
  EXPECT_NEAR(k["stalls"][0]["share_pct"].get<double>(), 100 * 3.1 / 7.16, 1e-6);
  EXPECT_EQ(k["stalls"][1]["reason"], "wait");
  EXPECT_EQ(k["stalls"][2]["reason"], "long_scoreboard");
  EXPECT_NEAR(k["stalls"][2]["cycles_per_issue"].get<double>(), 0.9, 1e-9);

  const nlohmann::json& e = p["kernels"][1];
  EXPECT_NE(e["name"].get<std::string>().find("\"relu\""), std::string::npos);  // doubled quotes
  EXPECT_EQ(e["tensor_pipe_pct"], 0);  // gmma "n/a", hmma 0
  EXPECT_NEAR(e["shared_mem_per_block_bytes"].get<double>(), 1024, 1e-9);  // "1,024" byte
  EXPECT_NEAR(e["duration_us"].get<double>(), 38.91, 1e-9);
  EXPECT_EQ(e["stalls"][0]["reason"], "long_scoreboard");
  EXPECT_NEAR(e["stalls"][0]["share_pct"].get<double>(), 100 * 21.7 / 26.6, 1e-6);
}

TEST(NcuCsv, DetailsPageUnitsAndMissingMetrics) {
  const std::string h =
      "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\","
      "\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
  auto row = [](const char* id, const char* name, const char* unit, const char* value) {
    return strf("\"%s\",\"7\",\"python3\",\"h\",\"k, with a comma\",\"1\",\"7\",\"(256, 1, 1)\",\"(80, 1, 1)\",\"0\","
                "\"9.0\",\"Command line profiler metrics\",\"%s\",\"%s\",\"%s\"\n",
                id, name, unit, value);
  };
  const std::string text = "some program output\n==PROF== Connected\n" + h +
                           row("0", "gpu__time_duration.sum", "msecond", "1.5") +
                           row("0", "launch__registers_per_thread", "register/thread", "32") +
                           row("0", "launch__shared_mem_per_block_dynamic", "Kbyte", "2") +
                           row("0", "some__metric_this_kforge_does_not_know.sum", "", "17") +
                           row("1", "gpu__time_duration.sum", "nsecond", "2,500") +
                           row("1", "lts__t_sector_hit_rate.pct", "%", "n/a");
  const nlohmann::json p = parse_ncu_csv(text);
  ASSERT_EQ(p["kernels"].size(), 2u) << p.dump(2);
  EXPECT_EQ(p["kernels"][0]["name"], "k, with a comma");
  EXPECT_NEAR(p["kernels"][0]["duration_us"].get<double>(), 1500, 1e-9);
  EXPECT_NEAR(p["kernels"][0]["shared_mem_per_block_bytes"].get<double>(), 2000, 1e-9);
  EXPECT_FALSE(p["kernels"][0].contains("l2_hit_rate_pct"));
  EXPECT_FALSE(p["kernels"][0].contains("stalls"));
  EXPECT_NEAR(p["kernels"][1]["duration_us"].get<double>(), 2.5, 1e-9);
  EXPECT_FALSE(p["kernels"][1].contains("l2_hit_rate_pct"));  // "n/a" is absent
}

TEST(NcuCsv, NothingUsableIsAnEmptyListNeverACrash) {
  for (const std::string& text :
       {std::string(), std::string("==PROF== No kernels were profiled.\n"), std::string("\"ID\"\n"),
        std::string("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\""),  // a row cut short
        std::string("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"fast\"\n\"unterminated"),
        std::string("\x01\xff\xfe garbage, \"\"\" ,,,\n\n")}) {
    const nlohmann::json p = parse_ncu_csv(text);
    ASSERT_TRUE(p["kernels"].is_array()) << text;
    for (const auto& k : p["kernels"]) {
      EXPECT_FALSE(k.contains("duration_us")) << k.dump();
      EXPECT_TRUE(is_valid_utf8(k["name"].get<std::string>()));
    }
  }
}

TEST(NcuCsv, MetricNamesAreSm90Names) {
  const auto& names = profile_metric_names();
  for (const char* n : {"gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                        "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
                        "launch__shared_mem_per_block_dynamic", "lts__t_sector_hit_rate.pct",
                        "l1tex__t_sector_hit_rate.pct",
                        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  // Every name the parser reads is requested, and the fixture holds a column for each.
  const std::string fixture = read_file(kFixture);
  for (const std::string& n : names) EXPECT_NE(fixture.find("\"" + n + "\""), std::string::npos) << n;
}

TEST(ProfileRun, MissingNcuSaysSoAndWhere) {
  const std::string dir = test::temp_dir();
  ScopedEnv path("PATH", dir);  // no ncu there
  ::unsetenv("KFORGE_NCU");
  std::string why;
  const std::string found = find_ncu("", why);
  if (!found.empty()) GTEST_SKIP() << "SKIPPED: " << found << " exists on this machine";
  const nlohmann::json p = run_ncu_profile({"/bin/true"}, {}, {});
  EXPECT_EQ(p["error_code"], profile_error::kNcuMissing) << p.dump();
  EXPECT_NE(p["error"].get<std::string>().find("KFORGE_NCU"), std::string::npos) << p.dump();
  EXPECT_FALSE(p.contains("kernels"));
  {
    ScopedEnv ncu("KFORGE_NCU", dir + "/no-such-ncu");
    const nlohmann::json q = run_ncu_profile({"/bin/true"}, {}, {});
    EXPECT_EQ(q["error_code"], profile_error::kNcuMissing);
    EXPECT_NE(q["error"].get<std::string>().find("no-such-ncu"), std::string::npos) << q.dump();
  }
  EXPECT_EQ(profile_summary(p).rfind("no profile (ncu_missing)", 0), 0u) << profile_summary(p);
}

TEST(ProfileRun, FakeNcuGivesTheFixturesKernelsAndTheCommandLine) {
  const std::string dir = test::temp_dir();
  ProfileOptions o;
  o.ncu = fixture_ncu(dir);
  o.max_kernels = 7;
  const nlohmann::json p = run_ncu_profile({"/bin/true", "--x"}, {}, o);
  ASSERT_FALSE(p.contains("error")) << p.dump();
  EXPECT_EQ(p["kernels"].size(), 2u);
  EXPECT_EQ(p["kernels_profiled"], 2);
  EXPECT_NEAR(p["total_duration_us"].get<double>(), 1234.56 + 38.91, 1e-6);
  EXPECT_GE(p["seconds"].get<double>(), 0);
  EXPECT_FALSE(p.contains("unavailable"));
  const std::string args = read_file(dir + "/args");
  for (const char* a : {"--clock-control none", "--profile-from-start off", "--launch-count 7", "--csv", "--page raw",
                        "--metrics gpu__time_duration.sum,", "/bin/true --x --result "})
    EXPECT_NE(args.find(a), std::string::npos) << a << " in " << args;
}

TEST(ProfileRun, RefusedCountersTimeoutsAndFailedTargetsAreErrors) {
  const std::string dir = test::temp_dir();
  ProfileOptions o;
  o.ncu = fake_ncu(dir,
                   "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                   "Performance Counters on the target device 0.'\nexit 1");
  nlohmann::json p = run_ncu_profile({"/bin/true"}, {}, o);
  EXPECT_EQ(p["error_code"], profile_error::kNcuPermission) << p.dump();
  EXPECT_NE(p["error"].get<std::string>().find("ERR_NVGPUCTRPERM"), std::string::npos);

  o.ncu = fake_ncu(dir, "sleep 30");
  o.timeout_s = 1;
  p = run_ncu_profile({"/bin/true"}, {}, o);
  EXPECT_EQ(p["error_code"], profile_error::kNcuTimeout) << p.dump();
  EXPECT_LT(p["seconds"].get<double>(), 20);

  o.timeout_s = 60;
  o.ncu = fake_ncu(dir, "echo '{\"ok\": false, \"error\": \"dlopen failed: nope\"}' > \"$RESULT\"\nexit 1");
  p = run_ncu_profile({"/bin/true"}, {}, o);
  EXPECT_EQ(p["error_code"], profile_error::kNcuFailed) << p.dump();
  EXPECT_NE(p["error"].get<std::string>().find("dlopen failed: nope"), std::string::npos);

  // A target that died without a result (killed by the sandbox's filter, say): the error says how to tell.
  o.ncu = fake_ncu(dir, "echo '==ERROR== The application returned an error code (11).'\nexit 11");
  p = run_ncu_profile({"/bin/true"}, {}, o);
  EXPECT_EQ(p["error_code"], profile_error::kNcuFailed) << p.dump();
  EXPECT_NE(p["error"].get<std::string>().find("KFORGE_PROFILE_SANDBOX=0"), std::string::npos) << p.dump();

  o.ncu = fake_ncu(dir, "echo '==WARNING== No kernels were profiled.'\necho '{\"ok\": true}' > \"$RESULT\"\nexit 0");
  p = run_ncu_profile({"/bin/true"}, {}, o);
  EXPECT_EQ(p["error_code"], profile_error::kNoKernels) << p.dump();
}

TEST(ProfileRun, AMetricThisNcuDoesNotKnowIsDroppedAndTriedOnceMore) {
  const std::string dir = test::temp_dir();
  ProfileOptions o;
  // The first call names an unknown metric and fails; the second (without it) profiles.
  o.ncu = fake_ncu(dir, "case \"$*\" in\n"
                        "  *gmma*) echo '==ERROR== Failed to find metric "
                        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active'; exit 1;;\n"
                        "esac\n"
                        "cp " + kFixture + " \"$LOG\"\necho '{\"ok\": true}' > \"$RESULT\"\nexit 0");
  const nlohmann::json p = run_ncu_profile({"/bin/true"}, {}, o);
  ASSERT_FALSE(p.contains("error")) << p.dump();
  ASSERT_TRUE(p.contains("unavailable")) << p.dump();
  EXPECT_EQ(p["unavailable"], nlohmann::json::array({"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"}));
  EXPECT_EQ(p["kernels"].size(), 2u);
}

TEST(ProfileTable, CompactRowsLongestFirst) {
  nlohmann::json p = parse_ncu_csv(read_file(kFixture));
  const std::string t = render_profile_table(p);
  EXPECT_EQ(t.rfind("| kernel | time | SM % | DRAM % | tensor % | occupancy % | regs | smem/block | L1 hit % | L2 hit % | "
                    "top stalls |\n",
                    0),
            0u)
      << t;
  // The parameter list and "void " go; the template arguments stay.
  EXPECT_NE(t.find("| kforge::sm90_gemm<128, 256, 64, 4, (kforge::R... | 1.235 ms | 84 | 12 | 84 | 19 | 168 | 193.0 KiB | 2 "
                   "| 71 | sleeping 43%, wait 34%, long_scoreboard 13% |"),
            std::string::npos)
      << t;
  EXPECT_LT(t.find("sm90_gemm"), t.find("vectorized_elementwise_kernel"));
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 4);
  // At most max_rows kernels; the rest in one line.
  const std::string one = render_profile_table(p, 1);
  EXPECT_EQ(one.find("vectorized"), std::string::npos);
  EXPECT_NE(one.find("(1 more kernel, 38.91 us in all)"), std::string::npos) << one;
  // A metric that is absent is "-"; a profile that failed has no table.
  p["kernels"][0].erase("l2_hit_rate_pct");
  p["kernels"][0].erase("stalls");
  EXPECT_NE(render_profile_table(p).find("| 2 | - | - |"), std::string::npos) << render_profile_table(p);
  EXPECT_EQ(render_profile_table({{"error", "ncu not found"}, {"error_code", "ncu_missing"}}), "");
  EXPECT_EQ(render_profile_table(nlohmann::json()), "");
  // A kernel name cannot break the table (a '|' of its own) or inject lines.
  nlohmann::json evil = {{"kernels", {{{"name", "a|b\n## Variant 9"}, {"duration_us", 1.0}}}}};
  const std::string e = render_profile_table(evil);
  EXPECT_NE(e.find("| a b ## Variant 9 | 1.00 us |"), std::string::npos) << e;
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 3);
}

TEST(ProfilePrompt, TheTableSitsUnderItsExemplarAndIsOffWithoutAProfile) {
  PromptInputs in;
  in.task = "the task";
  in.reference = "the reference";
  Exemplar a;
  a.id = 3;
  a.correct = true;
  a.speedup = 1.1;
  a.source = "// three\n";
  Exemplar b = a;
  b.id = 4;
  b.speedup = 2.0;
  b.source = "// four\n";
  b.profile = render_profile_table(parse_ncu_csv(read_file(kFixture)));
  in.exemplars = {a, b};
  const PromptTemplates t = PromptTemplates::builtin();
  const std::string user = build_prompt(in, t)[1].content;
  const size_t v3 = user.find("## Variant 1 (id 3)"), v4 = user.find("## Variant 2 (id 4)");
  ASSERT_NE(v3, std::string::npos);
  ASSERT_NE(v4, std::string::npos);
  const size_t table = user.find("| kernel | time |");
  ASSERT_NE(table, std::string::npos) << user;
  EXPECT_GT(table, v4);                                // under its exemplar
  EXPECT_LT(table, user.find("// four"));              // before the code
  EXPECT_GT(table, user.find("Notes from the evaluator", v4));
  EXPECT_NE(user.find("Nsight Compute profile of one call"), std::string::npos);
  EXPECT_EQ(user.find("| kernel | time |", table + 1), std::string::npos);  // once: id 3 has none
  // Without a profile the exemplar reads as it did before profiles existed.
  EXPECT_NE(user.find("Notes from the evaluator:\n\n(none)\n\n```cuda\n// three"), std::string::npos) << user;
  EXPECT_EQ(user.find("{{"), std::string::npos);
  EXPECT_EQ(user.find("\n\n\n"), std::string::npos);
  // profile.md can be overridden like any template; PyTorch exemplars show it too.
  PromptTemplates custom = t;
  custom.files["profile.md"] = "PROFILE:\n{{table}}\n";
  in.language = "python";
  const std::string py = build_prompt(in, custom)[1].content;
  EXPECT_NE(py.find("PROFILE:\n| kernel |"), std::string::npos) << py;
  EXPECT_NE(py.find("```python\n// four"), std::string::npos);
}

TEST(ProfileStore, AProfileIsStoredWithItsVerdictAndNothingElseChanges) {
  const std::string dir = test::temp_dir();
  ProgramDb db(dir + "/kforge-search.db");
  const int64_t run = db.create_run("hgemm:64x64x64", nlohmann::json::object());
  CandidateRecord c;
  c.run_id = run;
  c.policy = "seed";
  c.source = "x\n";
  const int64_t id = db.add_candidate(c);
  const nlohmann::json verdict = {{"correct", true}, {"reasons", nlohmann::json::array()}, {"details", {{"checks", {{"a", 1}}}}}};
  db.record_verdict(id, verdict, true, 1.5, 0.4);
  const nlohmann::json profile = parse_ncu_csv(read_file(kFixture));
  db.set_profile(id, profile);
  const auto back = db.candidate(id);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->verdict["details"]["profile"], profile);
  EXPECT_EQ(back->verdict["details"]["checks"], verdict["details"]["checks"]);
  EXPECT_TRUE(back->correct);
  EXPECT_DOUBLE_EQ(back->score, 1.5);
  EXPECT_DOUBLE_EQ(back->reward, 0.4);
  EXPECT_EQ(back->status, "evaluated");
  // Replaced, not appended; an error is stored the same way.
  db.set_profile(id, {{"error", "no ncu"}, {"error_code", "ncu_missing"}});
  EXPECT_EQ(db.candidate(id)->verdict["details"]["profile"]["error_code"], "ncu_missing");
  EXPECT_ANY_THROW(db.set_profile(id + 100, profile));
}

// The fixture's profile stored with a verdict, read back, rendered into a real prompt under its
// exemplar: the table read back from the prompt holds the stored values, row by row.
TEST(ProfilePrompt, ATableRenderedFromAStoredProfileHoldsItsValues) {
  const std::string dir = test::temp_dir();
  ProgramDb db(dir + "/kforge-search.db");
  const int64_t run = db.create_run("hgemm:4096x4096x4096", nlohmann::json::object());
  CandidateRecord c;
  c.run_id = run;
  c.policy = "seed";
  c.source = "// the exemplar's code\n";
  c.language = "cuda";
  const int64_t id = db.add_candidate(c);
  db.record_verdict(id, {{"correct", true}, {"reasons", nlohmann::json::array()}, {"details", nlohmann::json::object()}},
                    true, 1.7, 0.5);
  nlohmann::json stored = parse_ncu_csv(read_file(kFixture));
  // Six kernels: the table shows four, the longest first, and one line for the other two.
  for (int i = 0; i < 4; ++i) {
    nlohmann::json k = stored["kernels"][1];
    k["name"] = strf("void extra_kernel_%d(float*)", i);
    k["duration_us"] = 10.0 + 100.0 * i;
    k["registers_per_thread"] = 20 + i;
    stored["kernels"].push_back(k);
  }
  db.set_profile(id, stored);
  const nlohmann::json back = db.candidate(id)->verdict["details"]["profile"];
  Exemplar e;
  e.id = id;
  e.correct = true;
  e.speedup = 1.7;
  e.source = c.source;
  e.profile = render_profile_table(back);
  PromptInputs in;
  in.task = "the task";
  in.reference = "the reference";
  in.exemplars = {e};
  const std::string user = build_prompt(in, PromptTemplates::builtin())[1].content;
  const size_t table = user.find("| kernel | time |");
  ASSERT_NE(table, std::string::npos) << user;
  EXPECT_LT(table, user.find("// the exemplar's code"));
  EXPECT_EQ(test::check_profile_table(user, table, stored), "") << user.substr(table, 1500);
  const auto rows = test::read_profile_table(user, table);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].cells[0], "kforge::sm90_gemm<128, 256, 64, 4, (kforge::R...");
  EXPECT_EQ(rows[0].cells[1], "1.235 ms");
  EXPECT_EQ(rows[0].cells[6], "168");
  EXPECT_EQ(rows[1].cells[0], "extra_kernel_3");
  EXPECT_EQ(rows[1].cells[6], "23");
  EXPECT_NE(user.find("(2 more kernels, 48.91 us in all)"), std::string::npos) << user.substr(table, 1500);

  // The check can fail: a changed value, a dropped stall, a kernel shown that is not stored.
  nlohmann::json other = stored;
  other["kernels"][0]["sm_throughput_pct"] = 50.0;
  EXPECT_NE(test::check_profile_table(user, table, other).find("sm_throughput_pct"), std::string::npos);
  other = stored;
  other["kernels"][0]["stalls"][0]["share_pct"] = 12.0;
  EXPECT_NE(test::check_profile_table(user, table, other).find("stalls"), std::string::npos);
  other = stored;
  other["kernels"][0]["name"] = "void another_kernel()";
  EXPECT_NE(test::check_profile_table(user, table, other).find("kernel cell"), std::string::npos);
  other = stored;
  other["kernels"].erase(other["kernels"].size() - 1);
  EXPECT_NE(test::check_profile_table(user, table, other), "");
}

TEST(ProfileServe, AResultCarriesTheVerdictsProfile) {
  Verdict v;
  v.correct = true;
  v.details["profile"] = parse_ncu_csv(read_file(kFixture));
  const nlohmann::json r = Scorer::result_of(v, "rid", "hgemm:64x64x64", "sha", "fenced");
  ASSERT_TRUE(r.contains("profile"));
  EXPECT_EQ(r["profile"]["kernels"].size(), 2u);
  Verdict w;
  w.correct = true;
  EXPECT_FALSE(Scorer::result_of(w, "rid", "t", "sha", "fenced").contains("profile"));
}

// ---------------------------------------------------------------------------------------------
// End to end on the CPU: PyTorch candidates judged with --device cpu, profiled by a fake ncu.

bool have_torch() {
  static const bool yes = [] {
    if (find_python().empty()) return false;
    const nlohmann::json p = probe_python();
    return p.contains("torch") && p["torch"].is_string();
  }();
  return yes;
}

const std::string kRelu = std::string(KFORGE_SOURCE_DIR) + "/tasks/kforge/01_relu.py";

std::string relu_candidate(const std::string& dir) {
  const std::string path = dir + "/cand.py";
  write_file_atomic(path,
                    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n\n    def forward(self, x):\n        return x.clamp_min(0.0)\n");
  return path;
}

TEST(ProfileCli, ProfileAndEvalWithoutNcuSayWhyAndChangeNothingElse) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string dir = test::temp_dir();
  const std::string cand = relu_candidate(dir);
  // PATH without ncu (the system's folders only; python3 found through KFORGE_PYTHON), KFORGE_NCU unset.
  const std::string env = "env -u KFORGE_NCU KFORGE_PYTHON=" + find_python() + " PATH=/usr/bin:/bin ";
  std::string why;
  {
    ScopedEnv path("PATH", "/usr/bin:/bin");
    ::unsetenv("KFORGE_NCU");
    if (!find_ncu("", why).empty()) GTEST_SKIP() << "SKIPPED: an ncu is installed (/usr/bin, /bin or /usr/local/cuda/bin)";
  }
  auto r = test::ProcessResult{};
  {
    const std::string cmd = env + KFORGE_BINARY + " profile --task " + kRelu + " --device cpu --json " + cand + " >" +
                            dir + "/out 2>" + dir + "/err";
    const int st = std::system(cmd.c_str());
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = test::slurp(dir + "/out");
    r.err = test::slurp(dir + "/err");
  }
  ASSERT_EQ(r.rc, 1) << r.err << r.out;  // accepted, not profiled
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_TRUE(v["correct"].get<bool>()) << r.out;
  EXPECT_EQ(v["details"]["profile"]["error_code"], "ncu_missing") << r.out;

  // eval --profile: the same verdict fields, exit status 0, the profile says why it is missing.
  const std::string cmd = env + KFORGE_BINARY + " eval --task " + kRelu + " --device cpu --samples 3 --trials 1 --json " +
                          "--profile " + cand + " >" + dir + "/out 2>" + dir + "/err";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << test::slurp(dir + "/err");
  const nlohmann::json e = nlohmann::json::parse(test::slurp(dir + "/out"));
  EXPECT_TRUE(e["correct"].get<bool>());
  EXPECT_TRUE(e["speedup"].contains("eager"));
  EXPECT_EQ(e["details"]["profile"]["error_code"], "ncu_missing");
}

TEST(ProfileCli, FakeNcuEndToEndPrintsTheTable) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string dir = test::temp_dir();
  const std::string cand = relu_candidate(dir);
  fixture_ncu(dir);
  const std::string cmd = "KFORGE_NCU=" + dir + "/ncu " + KFORGE_BINARY + " profile --task " + kRelu +
                          " --device cpu --max-kernels 3 " + cand + " >" + dir + "/out 2>" + dir + "/err";
  const int st = std::system(cmd.c_str());
  const std::string out = test::slurp(dir + "/out");
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << test::slurp(dir + "/err") << out;
  EXPECT_NE(out.find("ACCEPT  " + cand + "  2 kernels, 1.273 ms, profiled in"), std::string::npos) << out;
  EXPECT_NE(out.find("| kforge::sm90_gemm<"), std::string::npos) << out;
  // The target was kforge_worker profile with the task, the candidate and its build folder.
  const std::string args = read_file(dir + "/args");
  EXPECT_NE(args.find("kforge_worker profile --task " + kRelu), std::string::npos) << args;
  EXPECT_NE(args.find("--candidate "), std::string::npos);
  EXPECT_NE(args.find("--build-dir "), std::string::npos);
  EXPECT_NE(args.find("--launch-count 3"), std::string::npos);
}

TEST(ProfileCli, BadOptionsAreUsageErrors) {
  const std::string dir = test::temp_dir();
  const std::string cand = relu_candidate(dir);
  auto r = test::run_kforge("profile --task " + kRelu + " --max-kernels 0 " + cand);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--max-kernels"), std::string::npos) << r.err;
  r = test::run_kforge("profile --task hgemm:64x64x64 --devices 0,1 " + cand);
  EXPECT_EQ(r.rc, 2) << r.err;
  r = test::run_kforge("profile --task " + kRelu + " " + dir + "/missing.py");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("missing.py"), std::string::npos) << r.err;
  r = test::run_kforge("profile --task hgemm:64x64x64 --warmup 101 " + cand);
  EXPECT_EQ(r.rc, 2);
  r = test::run_kforge("optimize --task " + kRelu + " --device cpu --profile-top 101 --llm-url http://127.0.0.1:9 "
                       "--model m --run-dir " + dir + "/run");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--profile-top"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

const char* kPyFull =
    "## Performance Analysis\nReLU is memory-bound.\n## Code Implementation\n```python\nimport torch\n"
    "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        return x.clamp_min(0.0)\n```\n";

// optimize profiles the best correct candidate of each iteration (the seed's too), stores the
// profile with its verdict, and the next prompt shows its table; --no-profile does neither.
TEST(ProfileOptimize, TheBestOfEachIterationIsProfiledAndShownUnlessNoProfile) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  for (const bool off : {false, true}) {
    const std::string dir = test::temp_dir();
    fixture_ncu(dir);
    test::ScriptedLlmServer server;
    server.push(test::ScriptedLlmServer::ok({kPyFull}));
    const std::string cmd =
        "KFORGE_NCU=" + dir + "/ncu " + KFORGE_BINARY + " optimize --task " + kRelu + " --llm-url " + server.url() +
        " --model scripted --group-size 1 --iterations 1 --samples 3 --trials 1 --device cpu --run-timeout 300 "
        "--atol 0.001 --run-dir " + dir + "/run" + (off ? " --no-profile" : "") + " >" + dir + "/out 2>" + dir + "/err";
    const int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << test::slurp(dir + "/err");
    ProgramDb db(dir + "/run/kforge-search.db");
    const auto cands = db.candidates(db.latest_run()->id);
    int profiled = 0;
    std::map<int, int> per_iteration;
    for (const CandidateRecord& c : cands)
      if (c.verdict.is_object() && c.verdict["details"].contains("profile")) {
        ++profiled;
        ++per_iteration[c.iteration];
        EXPECT_EQ(c.verdict["details"]["profile"]["kernels"].size(), 2u);
      }
    if (off) {
      EXPECT_EQ(profiled, 0);
      for (const CandidateRecord& c : cands) EXPECT_EQ(c.prompt.find("| kernel | time |"), std::string::npos);
      continue;
    }
    // The seed (iteration 0) and the best of iteration 1: one each (--profile-top 1).
    EXPECT_EQ(per_iteration, (std::map<int, int>{{0, 1}, {1, 1}})) << test::slurp(dir + "/err");
    // Iteration 1's prompt shows the seed with its table.
    bool shown = false;
    for (const CandidateRecord& c : cands)
      if (c.iteration == 1) shown |= c.prompt.find("| kernel | time |") != std::string::npos;
    EXPECT_TRUE(shown);
    EXPECT_NE(test::slurp(dir + "/err").find("2 kernels, 1.273 ms, profiled in"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------
// kforge data export: profiles in the rows, and --deviation-penalty/--length-penalty shaping the
// stored rewards again (as kforge serve shapes them), groups' advantages normalised again.

std::vector<nlohmann::json> jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  for (const std::string& line : split(read_file(path), '\n'))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// A run of two candidates in one group: a correct one (speed-up 2, worst error half its bound,
// profiled) and a rejected one, stored as optimize stores them (rewards without penalties).
std::string export_run(const std::string& dir) {
  fs::create_directories(dir + "/run");
  ProgramDb db(dir + "/run/kforge-search.db");
  const nlohmann::json config = {{"task", "hgemm:64x64x64"}, {"reward", "log"}, {"reward_clip_kind", 10.0},
                                 {"modes", {"offline"}}, {"reward_clip", 10.0}};
  const int64_t run = db.create_run("hgemm:64x64x64", config);
  const std::string prompt = dump_json(nlohmann::json::array({{{"role", "user"}, {"content", "make it fast"}}}));
  std::vector<CandidateRecord> cs(2);
  for (int i = 0; i < 2; ++i) {
    cs[i].run_id = run;
    cs[i].iteration = 1;
    cs[i].group = 0;
    cs[i].sample = i;
    cs[i].policy = "llm:scripted";
    cs[i].prompt = prompt;
    cs[i].source = i == 0 ? "int a = b + c ;\n" : "broken\n";  // 7 tokens, 1 token
  }
  const std::vector<int64_t> ids = db.add_candidates(cs);
  Verdict good;
  good.correct = true;
  good.speedup["offline"].median = 2.0;
  good.details["checks"]["worst_error_over_bound"] = 0.5;
  apply_reward(good, RewardConfig{}, &cs[0].source);
  db.record_verdict(ids[0], to_json(good), true, 2.0, good.reward);
  Verdict bad;
  bad.reject("wrong_result", "wrong");
  db.record_verdict(ids[1], to_json(bad), false, 0, rejected_reward(RewardConfig{}));
  db.set_advantages({{ids[0], 1.0}, {ids[1], -1.0}});
  db.set_profile(ids[0], parse_ncu_csv(read_file(kFixture)));
  return dir + "/run";
}

TEST(ProfileExport, RowsCarryProfilesAndTheStoredRewardParts) {
  const std::string dir = test::temp_dir();
  const std::string run = export_run(dir);
  auto r = test::run_kforge("data export --kind sft --db " + run + " --out " + dir + "/sft.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto rows = jsonl(dir + "/sft.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0]["reward"].get<double>(), std::log(2.0), 1e-12);
  EXPECT_EQ(rows[0]["reward_parts"]["deviation_penalty"], 0.0);
  EXPECT_EQ(rows[0]["profile"]["kernels"].size(), 2u);
  r = test::run_kforge("data export --kind groups --db " + run + " --out " + dir + "/g.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  rows = jsonl(dir + "/g.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["profiles"].size(), 2u);
  EXPECT_EQ(rows[0]["profiles"][0]["kernels"].size(), 2u);
  EXPECT_TRUE(rows[0]["profiles"][1].is_null());
  EXPECT_EQ(rows[0]["advantages"], nlohmann::json::array({1.0, -1.0}));
  EXPECT_EQ(rows[0]["reward_parts"].size(), 2u);
}

TEST(ProfileExport, PenaltiesShapeTheRewardsAgainAsServeDoes) {
  const std::string dir = test::temp_dir();
  const std::string run = export_run(dir);
  auto r = test::run_kforge("data export --kind sft --db " + run + " --deviation-penalty 0.4 --out " + dir + "/sft.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto rows = jsonl(dir + "/sft.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0]["reward"].get<double>(), std::log(2.0) - 0.4 * 0.5, 1e-12);
  EXPECT_NEAR(rows[0]["reward_parts"]["deviation_penalty"].get<double>(), 0.2, 1e-12);
  EXPECT_EQ(rows[0]["reward_parts"]["length_penalty"], 0.0);  // not given: off

  // Both penalties; a budget of 3 tokens for a 7-token file: 0.1 x (7 - 3) / 3.
  r = test::run_kforge("data export --kind groups --db " + run +
                       " --deviation-penalty 0.4 --length-penalty 0.1:3 --out " + dir + "/g.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  rows = jsonl(dir + "/g.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0]["rewards"][0].get<double>(), std::log(2.0) - 0.2 - 0.4 / 3, 1e-12);
  EXPECT_EQ(rows[0]["reward_parts"][0]["tokens"], 7);
  EXPECT_EQ(rows[0]["rewards"][1], -8.0);  // the rejection keeps the floor
  // Normalised again: two members, the correct one above the rejection.
  EXPECT_NEAR(rows[0]["advantages"][0].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(rows[0]["advantages"][1].get<double>(), -1.0, 1e-9);

  // A penalty large enough to clamp: the floor + 1 (-7), still above the rejection.
  r = test::run_kforge("data export --kind sft --db " + run + " --length-penalty 100:1 --out " + dir + "/c.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(jsonl(dir + "/c.jsonl")[0]["reward"], -7.0);
  EXPECT_EQ(jsonl(dir + "/c.jsonl")[0]["reward_parts"]["clamped"], true);

  // Bad values and prompts rows (no rewards) are usage errors; nothing is written.
  for (const char* bad : {"--deviation-penalty -1", "--length-penalty 0.1", "--length-penalty x:3"}) {
    r = test::run_kforge("data export --kind sft --db " + run + " " + bad + " --out " + dir + "/bad.jsonl");
    EXPECT_EQ(r.rc, 2) << bad;
    EXPECT_EQ(test::count_lines(r.err), 1) << r.err;
  }
  r = test::run_kforge("data export --kind prompts --db " + run + " --deviation-penalty 0.4 --out " + dir + "/bad.jsonl");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--kind sft and groups"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/bad.jsonl"));
}

// ---------------------------------------------------------------------------------------------
// kforge serve's per-item "profile": the service, the store, the scorer and the HTTP front in this
// process, on loopback, judging the CPU ReLU task (--device cpu); ncu a fake that prints the
// fixture, a path with no ncu, or one that is refused the counters.

// An honest ReLU answer; `tag` (a comment in the code) makes its code differ from the others'.
std::string honest_code(const std::string& tag = "") {
  return "import torch\nimport torch.nn as nn\n" + (tag.empty() ? "" : "# " + tag + "\n") +
         "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
         "    def forward(self, x):\n        return x.clamp_min(0.0)\n";
}
std::string honest(const std::string& tag = "") { return "```python\n" + honest_code(tag) + "```\n"; }
const std::string kServeHonest = honest();

std::string serve_threaded(const std::string& tag) {
  return "```python\nimport threading\nimport torch\nimport torch.nn as nn\n# " + tag +
         "\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        threading.Thread(target=lambda: None).start()\n"
         "        return x.clamp_min(0.0)\n```\n";
}

// A server over the CPU ReLU task: `ncu` is the profiler's path; with `reuse`, --reuse-verdicts.
class LoopbackServe {
 public:
  LoopbackServe(const std::string& ncu, bool reuse, const std::string& store_path = "") {
    const std::string dir = test::temp_dir();
    ServiceOptions so;
    so.work_dir = dir + "/work";
    so.profile_options.ncu = ncu;
    service = std::make_unique<EvalService>(so);
    TorchEvalOptions to;
    to.device = "cpu";
    to.samples = 3;
    to.trials = 1;
    to.atol = 1e-3;
    to.skip_timing = true;  // verified only: the profile is what is tested here
    service->add_task(make_torch_task("01_relu", kSource + "/tests/corpus/torch/tasks_cpu/01_relu.py", to));
    store = std::make_unique<ServeStore>(store_path.empty() ? dir + "/serve.db" : store_path);
    ScorerOptions sc;
    sc.reuse_verdicts = reuse;
    scorer = std::make_unique<Scorer>(*service, *store, sc);
    ServeHttpOptions ho;
    ho.port = 0;
    ho.token = "";
    ho.threads = 8;
    http = std::make_unique<ServeHttp>(ho, *scorer, *service, *store);
    port = http->bind();
    thread = std::thread([this] { http->run(); });
  }
  ~LoopbackServe() {
    http->stop();
    thread.join();
    http.reset();
    scorer.reset();
    service.reset();
  }
  nlohmann::json post(const std::string& path, const nlohmann::json& body, int& status) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(900, 0);
    auto r = c.Post(path, dump_json(body), "application/json");
    status = r ? r->status : -1;
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }
  nlohmann::json get(const std::string& path) {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get(path);
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }

  std::unique_ptr<EvalService> service;
  std::unique_ptr<ServeStore> store;
  std::unique_ptr<Scorer> scorer;
  std::unique_ptr<ServeHttp> http;
  int port = 0;
  std::thread thread;
};

nlohmann::json items_body(const std::vector<nlohmann::json>& items) { return {{"items", nlohmann::json(items)}}; }

nlohmann::json item(const std::string& completion, const std::string& id, std::optional<bool> profile = std::nullopt) {
  nlohmann::json j = {{"task_id", "01_relu"}, {"completion", completion}, {"request_id", id}};
  if (profile) j["profile"] = *profile;
  return j;
}

// Where ncu is missing or refused, an item that asks for a profile gets the verdict it would have
// had without asking, plus profile.error saying why; items that did not ask get no profile.
TEST(ProfileServe, PerItemProfileWithoutNcuOrRefusedSaysWhyAndChangesNothingElse) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string dir = test::temp_dir();
  const std::string refused = fake_ncu(dir,
                                       "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                                       "NVIDIA GPU Performance Counters on the target device 0.'\nexit 1");
  for (const auto& [ncu, code] : {std::pair<std::string, std::string>{dir + "/no-such-ncu", profile_error::kNcuMissing},
                                  {refused, profile_error::kNcuPermission}}) {
    SCOPED_TRACE(code);
    LoopbackServe srv(ncu, false);
    ASSERT_GT(srv.port, 0);
    int status = 0;
    const nlohmann::json body = items_body({item(kServeHonest, "p1", true), item(kServeHonest + std::string("# same\n"), "n1"),
                                            item(serve_threaded("t"), "t1", true), item("no code here", "x1", true)});
    const nlohmann::json res = srv.post("/v1/score", body, status);
    ASSERT_EQ(status, 200) << res.dump(1);
    ASSERT_EQ(res["results"].size(), 4u);
    const nlohmann::json& p = res["results"][0];
    const nlohmann::json& n = res["results"][1];
    ASSERT_TRUE(p["correct"].get<bool>()) << p.dump(1);
    ASSERT_TRUE(p.contains("profile")) << p.dump(1);
    EXPECT_EQ(p["profile"]["error_code"], code) << p.dump(1);
    EXPECT_FALSE(p["profile"].contains("kernels"));
    // Nothing else changes: the same verdict as the item that did not ask.
    EXPECT_FALSE(n.contains("profile")) << n.dump(1);
    EXPECT_TRUE(n["correct"].get<bool>());
    for (const char* k : {"correct", "reward", "reasons", "flags", "speedup"}) EXPECT_EQ(p[k], n[k]) << k;
    // A rejection is not profiled, whatever it asked.
    EXPECT_FALSE(res["results"][2]["correct"].get<bool>());
    EXPECT_FALSE(res["results"][2].contains("profile")) << res["results"][2].dump(1);
    EXPECT_FALSE(res["results"][3].contains("profile"));
    // What was stored is what was answered.
    EXPECT_EQ(srv.store->get("p1")->result["profile"]["error_code"], code);
    EXPECT_TRUE(srv.store->get("p1")->profile);
    EXPECT_FALSE(srv.store->get("n1")->profile);
  }
}

// With a working (fake) ncu: /v1/score per item, /v1/jobs for the whole body, bad values refused,
// and --reuse-verdicts reusing a verdict for a profile request only when it was profiled.
TEST(ProfileServe, PerItemAndPerJobProfileOverHttpAndReuseOnlyWithAProfile) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string dir = test::temp_dir();
  LoopbackServe srv(fixture_ncu(dir), true);
  ASSERT_GT(srv.port, 0);
  int status = 0;

  // Bad values: 400, nothing stored.
  nlohmann::json bad1 = nlohmann::json::object(), bad2 = nlohmann::json::object();
  bad1["items"] = nlohmann::json(std::vector<nlohmann::json>{item(kServeHonest, "b1")});
  bad1["profile"] = "yes";  // the body's default
  nlohmann::json b2 = item(kServeHonest, "b2");
  b2["profile"] = 1;        // an item's own
  bad2["items"] = nlohmann::json(std::vector<nlohmann::json>{b2});
  for (const nlohmann::json& bad : {bad1, bad2}) {
    const nlohmann::json r = srv.post("/v1/score", bad, status);
    EXPECT_EQ(status, 400) << r.dump();
    EXPECT_NE(r["error"].get<std::string>().find("'profile' must be true or false"), std::string::npos) << r.dump();
  }
  EXPECT_FALSE(srv.store->get("b1"));
  EXPECT_FALSE(srv.store->get("b2"));

  // The honest code judged without a profile first.
  nlohmann::json r = srv.post("/v1/score", items_body({item(kServeHonest, "a1")}), status);
  ASSERT_EQ(status, 200) << r.dump(1);
  ASSERT_TRUE(r["results"][0]["correct"].get<bool>()) << r.dump(1);
  EXPECT_FALSE(r["results"][0].contains("profile"));

  // The same code asking for a profile: that verdict has none, so it is judged again and profiled.
  r = srv.post("/v1/score", items_body({item(kServeHonest, "a2", true)}), status);
  ASSERT_EQ(status, 200) << r.dump(1);
  const nlohmann::json a2 = r["results"][0];  // a copy: r is reused below
  EXPECT_FALSE(a2.contains("reused_from")) << a2.dump(1);
  ASSERT_TRUE(a2.contains("profile")) << a2.dump(1);
  ASSERT_FALSE(a2["profile"].contains("error")) << a2.dump(1);
  EXPECT_EQ(a2["profile"]["kernels"].size(), 2u);
  EXPECT_NEAR(a2["profile"]["total_duration_us"].get<double>(), 1234.56 + 38.91, 1e-6);
  EXPECT_EQ(a2["profile"]["kernels"], parse_ncu_csv(read_file(kFixture))["kernels"]);
  EXPECT_EQ(a2["profile"]["kernels"][0]["registers_per_thread"], 168);
  EXPECT_EQ(srv.store->counts().judged, 2);

  // Asked again under a new id: reused from the profiled verdict, profile and all; one without
  // "profile" is reused from the first verdict (or the profiled one) and needs no profile.
  r = srv.post("/v1/score", items_body({item(kServeHonest, "a3", true), item(kServeHonest, "a4", false)}), status);
  ASSERT_EQ(status, 200) << r.dump(1);
  EXPECT_EQ(r["results"][0]["reused_from"], "a2") << r["results"][0].dump(1);
  EXPECT_EQ(r["results"][0]["profile"], a2["profile"]);
  EXPECT_TRUE(r["results"][1].contains("reused_from"));
  EXPECT_EQ(srv.store->counts().judged, 2);  // nothing judged again

  // A job whose body asks for profiles; one item opts out.
  const nlohmann::json job = srv.post(
      "/v1/jobs",
      [] {
        nlohmann::json b = items_body({item(honest("job"), "j1"), item(honest("out"), "j2", false)});
        b["profile"] = true;
        return b;
      }(),
      status);
  ASSERT_EQ(status, 202) << job.dump();
  nlohmann::json polled;
  for (int i = 0; i < 1500; ++i) {
    polled = srv.get("/v1/jobs/" + job["job_id"].get<std::string>());
    if (polled.value("state", "") == "done") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(polled["state"], "done") << polled.dump(1);
  ASSERT_EQ(polled["results"].size(), 2u);
  EXPECT_TRUE(polled["results"][0]["correct"].get<bool>()) << polled.dump(1);
  EXPECT_EQ(polled["results"][0]["profile"]["kernels"].size(), 2u) << polled.dump(1);
  EXPECT_FALSE(polled["results"][1].contains("profile")) << polled["results"][1].dump(1);
}

// A store written before items could ask for a profile (schema 1) opens, migrates, and keeps its
// rows: a pending one reads as not asking for a profile, a done one keeps its result.
TEST(ProfileServe, AStoreOfSchemaOneMigratesAndKeepsItsRows) {
  const std::string path = test::temp_dir() + "/old.db";
  {
    SqliteDb db(path, "serve store");
    // Schema 1 as kforge wrote it before requests.profile (src/serve/store.cpp, migration 1).
    db.exec(
        "CREATE TABLE requests (request_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, completion TEXT NOT NULL, "
        "completion_sha TEXT NOT NULL, code TEXT NOT NULL, code_sha TEXT NOT NULL, state TEXT NOT NULL, origin TEXT, "
        "result_json TEXT, reward REAL, correct INTEGER, attempts INTEGER NOT NULL DEFAULT 0, job_id TEXT, "
        "accepted_at REAL NOT NULL, done_at REAL);"
        "CREATE INDEX requests_state ON requests(state);"
        "CREATE INDEX requests_code ON requests(task_id, code_sha, origin);"
        "CREATE TABLE jobs (job_id TEXT PRIMARY KEY, request_ids_json TEXT NOT NULL, created_at REAL NOT NULL);"
        "CREATE TABLE schema_version(version INTEGER); INSERT INTO schema_version(version) VALUES (1);"
        "INSERT INTO requests VALUES ('old-pending', '01_relu', 'c', 'cs', 'code', 'sha', 'pending', NULL, NULL, NULL, "
        "NULL, 1, NULL, 1.0, NULL);"
        "INSERT INTO requests VALUES ('old-done', '01_relu', 'c2', 'cs2', 'code', 'sha', 'done', 'judged', "
        "'{\"reward\": 0.5, \"judge_key\": \"k\"}', 0.5, 1, 1, NULL, 1.0, 2.0);");
  }
  ServeStore store(path);
  const auto pending = store.pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].request_id, "old-pending");
  EXPECT_FALSE(pending[0].profile);
  EXPECT_EQ(pending[0].attempts, 1);
  const auto done = store.get("old-done");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->result["reward"], 0.5);
  // A stored verdict without a profile is reused for an item that does not ask, not for one that does.
  EXPECT_TRUE(store.judged_result("01_relu", "sha", "k", false));
  EXPECT_FALSE(store.judged_result("01_relu", "sha", "k", true));
}

// A pending item's "profile" survives a restart: the store keeps it, and recover() profiles it.
TEST(ProfileServe, APendingItemsProfileRequestSurvivesARestart) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string dir = test::temp_dir();
  const std::string store_path = dir + "/serve.db";
  {
    ServeStore s(store_path);
    ServeRecord r;
    r.request_id = "left";
    r.task_id = "01_relu";
    r.completion = kServeHonest;
    r.completion_sha = "sha";
    r.code = honest_code();
    r.code_sha = "code-sha";
    r.profile = true;
    ASSERT_FALSE(s.admit({r}, "")[0]);  // pending, as a killed server leaves it
    ASSERT_EQ(s.pending().size(), 1u);
    EXPECT_TRUE(s.pending()[0].profile);
  }
  LoopbackServe srv(fixture_ncu(dir), false, store_path);
  EXPECT_EQ(srv.scorer->recover(), 1u);
  nlohmann::json got;
  for (int i = 0; i < 1500; ++i) {
    got = srv.scorer->lookup("left");
    if (got.value("status", "") == "done") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(got["status"], "done") << got.dump(1);
  EXPECT_TRUE(got["correct"].get<bool>()) << got.dump(1);
  EXPECT_EQ(got["profile"]["kernels"].size(), 2u) << got.dump(1);
}

}  // namespace
}  // namespace kforge
