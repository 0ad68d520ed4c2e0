// kforge corpus build|search|describe (src/corpus/): the chunker, near-duplicate detection and
// licence detection on their own; `build` on a fixture tree made here (exact and near duplicates
// dropped, licences, chunks along function boundaries) and on the machine's CUDA headers; FTS5
// search; `describe` against the scripted LLM server and from its cassette, the spending cap across
// reruns, and a kill -9 in the middle of describe followed by a rerun that loses and duplicates
// nothing.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/process.hpp"
#include "../support/scripted_llm_server.hpp"
#include "compile/compile.hpp"
#include "corpus/build.hpp"
#include "corpus/chunker.hpp"
#include "corpus/dedup.hpp"
#include "corpus/licence.hpp"
#include "search/program_db.hpp"

namespace kforge {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using test::run_kforge;
using test::ScriptedLlmServer;
using test::slurp;

void no_proxy_for_loopback() {
  ::setenv("no_proxy", "127.0.0.1,localhost", 1);
  ::setenv("NO_PROXY", "127.0.0.1,localhost", 1);
}

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// A function of about 400 characters whose body names `name` several times.
std::string function_named(const std::string& name, int salt) {
  std::string s = "__global__ void " + name + "(const float* __restrict__ in, float* out, int n) {\n";
  s += "  // a brace in a comment: { and a string: \"}\"\n";
  s += "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n";
  s += "  const char* tag = \"" + name + " {\";\n  (void)tag;\n";
  for (int k = 0; k < 4; ++k)
    s += "  if (i + " + std::to_string(k * 7 + salt) + " < n) out[i] = in[i] * " + std::to_string(salt + k) +
         ".0f + out[i];\n";
  s += "}\n\n";
  return s;
}

bool ends_with_aten(const std::string& d) { return d.size() >= 12 && d.substr(d.size() - 12) == "include/ATen"; }

const char* kMit =
    "MIT License\n\nCopyright (c) 2024 Fixture Authors\n\nPermission is hereby granted, free of charge, to any person "
    "obtaining a copy\nof this software and associated documentation files (the \"Software\"), to deal\n";

// ---------------------------------------------------------------------------------------------

TEST(CorpusChunker, SplitsAtFunctionBoundariesIgnoringBracesInCommentsAndStrings) {
  std::string src = "// file header { not a block\n#include <cuda_runtime.h>\n#define OPEN {\nnamespace fx {\n\n";
  src += function_named("alpha_kernel", 1);
  src += "struct Params {\n  int a;\n  int b;\n};\n\n";
  src += "const char* raw = R\"x(a raw string with } and { inside)x\";\n\n";
  src += function_named("beta_kernel", 2);
  src += function_named("gamma_kernel", 3);
  src += "}  // namespace fx\n";
  ChunkOptions o;
  o.min_chars = 0;
  const auto chunks = split_chunks(src, o);
  // alpha (with the header, the #include and the namespace line before it), Params, raw + beta, gamma.
  for (const SourceChunk& c : chunks) {
    int functions = 0;
    for (const char* f : {"alpha_kernel(", "beta_kernel(", "gamma_kernel("})
      functions += c.text.find(std::string("__global__ void ") + f) != std::string::npos;
    EXPECT_LE(functions, 1) << "two functions in one chunk:\n" << c.text;
    EXPECT_EQ(src.substr(c.begin, c.end - c.begin), c.text);
  }
  // Each function, whole, in exactly one chunk.
  int salt = 0;
  for (const char* name : {"alpha_kernel", "beta_kernel", "gamma_kernel"}) {
    std::string fn = function_named(name, ++salt);
    while (std::isspace(static_cast<unsigned char>(fn.back()))) fn.pop_back();
    int holding = 0;
    for (const SourceChunk& c : chunks) holding += c.text.find(fn) != std::string::npos;
    EXPECT_EQ(holding, 1) << name;
  }
  ASSERT_GE(chunks.size(), 4u);
  EXPECT_NE(chunks[0].text.find("#include <cuda_runtime.h>"), std::string::npos);
  EXPECT_NE(chunks[0].text.find("alpha_kernel"), std::string::npos);
  EXPECT_EQ(chunks[0].first_line, 1);
  // Every non-blank byte of the source is in exactly one chunk, in order.
  std::string joined;
  size_t last_end = 0;
  for (const SourceChunk& c : chunks) {
    EXPECT_GE(c.begin, last_end);
    last_end = c.end;
    joined += c.text;
  }
  std::string a, b;
  for (char ch : src)
    if (!std::isspace(static_cast<unsigned char>(ch))) a += ch;
  for (char ch : joined)
    if (!std::isspace(static_cast<unsigned char>(ch))) b += ch;
  EXPECT_EQ(a, b);

  // With the default minimum size small functions are packed together, still whole.
  const auto packed = split_chunks(src, ChunkOptions{});
  EXPECT_LT(packed.size(), chunks.size());
  for (const SourceChunk& c : packed) EXPECT_LE(c.text.size(), ChunkOptions{}.max_chars);
}

TEST(CorpusChunker, CutsAnOversizedFunctionWithinTheMaximum) {
  std::string src = "void big() {\n";
  for (int i = 0; i < 200; ++i) src += "  {\n    int v" + std::to_string(i) + " = " + std::to_string(i) + ";\n  }\n";
  src += "}\n";
  ChunkOptions o;
  o.max_chars = 300;
  o.min_chars = 0;
  const auto chunks = split_chunks(src, o);
  ASSERT_GT(chunks.size(), 5u);
  for (const SourceChunk& c : chunks) {
    EXPECT_LE(c.text.size(), 300u);
    // Cut at the shallowest line ends: no chunk starts inside an inner block's body.
    EXPECT_TRUE(c.text.rfind("{", 0) == 0 || c.text.rfind("void big", 0) == 0 || c.text.rfind("}", 0) == 0)
        << c.text.substr(0, 40);
  }
}

TEST(CorpusChunker, MasksCommentsStringsAndPreprocessorLines) {
  const std::string src = "int a = 1'000; // {\nchar c = '{';\n#define X {\n/* } */ const char* s = \"{}\";\n";
  const std::string m = mask_source(src);
  ASSERT_EQ(m.size(), src.size());
  EXPECT_EQ(m.find('{'), std::string::npos) << m;
  EXPECT_EQ(m.find('}'), std::string::npos) << m;
  EXPECT_NE(m.find("int a = 1'000;"), std::string::npos) << m;  // a digit separator is not a char literal
}

TEST(CorpusDedup, MinHashTellsNearCopiesFromDifferentCode) {
  std::string a;
  for (int i = 0; i < 12; ++i) a += function_named("kernel_" + std::to_string(i), i);
  std::string near = a;
  near.replace(near.find("kernel_3"), 8, "kernel_X");  // one identifier renamed
  std::string other;
  for (int i = 0; i < 30; ++i)
    other += "template <class T> T reduce_" + std::to_string(i) + "(T* p, size_t n) { T s{}; while (n--) s += p[n]; "
             "return s * T(" + std::to_string(i) + "); }\n";
  const auto sa = minhash_signature(mask_source(a)), sn = minhash_signature(mask_source(near)),
             so = minhash_signature(mask_source(other));
  EXPECT_GE(estimated_jaccard(sa, sn), 0.8);
  EXPECT_LT(estimated_jaccard(sa, so), 0.2);
  NearDuplicateIndex index(0.8);
  EXPECT_EQ(index.add(sa), -1);
  EXPECT_EQ(index.add(so), -1);
  EXPECT_EQ(index.add(sn), 0);
}

TEST(CorpusLicence, FromSpdxLinesHeadersAndThePackageLicenceFile) {
  EXPECT_EQ(licence_from_text("// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception\nint x;"),
            "Apache-2.0 WITH LLVM-exception");
  EXPECT_EQ(licence_from_text("/* SPDX-License-Identifier: BSD-3-Clause */"), "BSD-3-Clause");
  EXPECT_EQ(licence_from_text(std::string("/*\n * ") + kMit + " */"), "MIT");
  EXPECT_EQ(licence_from_text(" * Redistribution and use in source and binary forms, with or without\n * "
                              "modification ... Neither the name of the copyright holder"),
            "BSD-3-Clause");
  EXPECT_EQ(licence_from_text("Licensed under the Apache License, Version 2.0 (the \"License\")"), "Apache-2.0");
  EXPECT_EQ(licence_from_text("int main() { return 0; }"), "");

  const fs::path root = test::temp_dir();
  write(root / "LICENSE", kMit);
  write(root / "sub" / "deep" / "k.cu", "__global__ void k() {}\n");
  write(root / "sub" / "own.cu", "// SPDX-License-Identifier: BSL-1.0\nvoid f() {}\n");
  LicenceFinder lf(root.string(), "");
  std::string how;
  EXPECT_EQ(lf.find((root / "sub" / "deep" / "k.cu").string(), "__global__ void k() {}\n", &how), "MIT");
  EXPECT_EQ(how, "file:" + (root / "LICENSE").string());
  EXPECT_EQ(lf.find((root / "sub" / "own.cu").string(), "// SPDX-License-Identifier: BSL-1.0\n", &how), "BSL-1.0");
  EXPECT_EQ(how, "spdx");
  const fs::path bare = test::temp_dir();
  write(bare / "x.h", "int x;\n");
  LicenceFinder none(bare.string(), "");
  EXPECT_EQ(none.find((bare / "x.h").string(), "int x;\n", &how), "unknown");
  LicenceFinder pkg(bare.string(), (root / "LICENSE").string());
  EXPECT_EQ(pkg.find((bare / "x.h").string(), "int x;\n", &how), "MIT");
  fs::remove_all(root);
  fs::remove_all(bare);
}

// The fixture: two source folders with an exact copy, a near copy, SPDX and LICENSE-file licences
// and a file with none.
struct Fixture {
  fs::path root = test::temp_dir();
  fs::path a = root / "alpha_pkg", b = root / "beta_pkg", out = root / "corpus";
  std::string kernels;
  Fixture() {
    write(a / "LICENSE", kMit);
    for (int i = 0; i < 6; ++i) kernels += function_named("fixture_kernel_" + std::to_string(i), i);
    write(a / "kernels.cu", "#include <cuda_runtime.h>\n\n" + kernels);
    write(a / "sub" / "copy.cu", "#include <cuda_runtime.h>\n\n" + kernels);  // exact duplicate
    std::string near = "// a different comment\n#include <cuda_runtime.h>\n\n" + kernels;
    near.replace(near.find("fixture_kernel_2("), 16, "fixture_kernel_Z");
    write(a / "near.cu", near);  // near duplicate
    write(a / "apache.cuh",
          "// SPDX-License-Identifier: Apache-2.0\n#pragma once\n" + function_named("spdx_zebra_kernel", 40) +
              function_named("spdx_yak_kernel", 41));
    write(a / "notes.txt", "not a source file { }\n");
    write(b / "plain.hpp", "#pragma once\ninline int quokkaUniqueHelper(int v) {\n  return v * 3 + 1;\n}\n" +
                               function_named("wombat_unique_kernel", 50));
  }
  ~Fixture() { fs::remove_all(root); }
  std::string build_args() const {
    return "corpus build --installed none --source " + a.string() + " --source " + b.string() + " --out " +
           out.string() + " --min-chunk-chars 0";
  }
};

TEST(CorpusBuild, FixtureTreeDropsDuplicatesDetectsLicencesChunksAtFunctions) {
  Fixture f;
  const auto r = run_kforge(f.build_args());
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 exact duplicates, 1 near duplicates"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("files to look at"), std::string::npos) << r.err;  // progress lines
  for (const char* name : {"corpus.jsonl", "files.jsonl", "summary.json", "corpus.sqlite"})
    EXPECT_TRUE(fs::is_regular_file(f.out / name)) << name;

  std::map<std::string, json> files;
  for (const json& j : read_jsonl((f.out / "files.jsonl").string())) files[fs::path(j["path"].get<std::string>()).filename()] = j;
  ASSERT_EQ(files.size(), 5u);  // notes.txt is not a source
  EXPECT_EQ(files["kernels.cu"]["status"], "kept");
  EXPECT_EQ(files["copy.cu"]["status"], "duplicate");
  EXPECT_EQ(files["copy.cu"]["duplicate_of"], (f.a / "kernels.cu").string());
  EXPECT_EQ(files["near.cu"]["status"], "near_duplicate");
  EXPECT_EQ(files["near.cu"]["duplicate_of"], (f.a / "kernels.cu").string());
  EXPECT_EQ(files["kernels.cu"]["licence"], "MIT");
  EXPECT_EQ(files["kernels.cu"]["licence_source"], "file:" + (f.a / "LICENSE").string());
  EXPECT_EQ(files["apache.cuh"]["licence"], "Apache-2.0");
  EXPECT_EQ(files["plain.hpp"]["licence"], "unknown");
  EXPECT_EQ(files["plain.hpp"]["package"], "beta_pkg");

  const auto chunks = read_jsonl((f.out / "corpus.jsonl").string());
  // kernels.cu: 6 functions; apache.cuh: 2; plain.hpp: 2.
  ASSERT_EQ(chunks.size(), 10u);
  std::set<std::string> ids, keys0;
  for (const auto& [k, v] : chunks[0].items()) keys0.insert(k);
  EXPECT_EQ(keys0, (std::set<std::string>{"id", "text", "origin", "package", "licence", "sha256", "first_line",
                                          "last_line"}));
  int kernel_chunks = 0;
  for (const json& c : chunks) {
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    EXPECT_EQ(keys, keys0);
    EXPECT_TRUE(ids.insert(c["id"].get<std::string>()).second);
    const std::string text = c["text"];
    EXPECT_EQ(text.back(), '}');
    EXPECT_EQ(c["sha256"].get<std::string>().substr(0, 16), c["id"].get<std::string>());
    EXPECT_EQ(text.find("fixture_kernel_Z"), std::string::npos);  // nothing of the near duplicate
    if (text.find("fixture_kernel_") != std::string::npos) {
      ++kernel_chunks;
      EXPECT_EQ(c["licence"], "MIT");
      EXPECT_EQ(c["package"], "alpha_pkg");
      int n = 0;
      for (size_t p = text.find("__global__"); p != std::string::npos; p = text.find("__global__", p + 1)) ++n;
      EXPECT_EQ(n, 1) << text;
    }
  }
  EXPECT_EQ(kernel_chunks, 6);

  // A second build into the same folder is refused, and changes nothing.
  const auto again = run_kforge(f.build_args());
  EXPECT_EQ(again.rc, 2);
  EXPECT_EQ(test::count_lines(again.err), 1) << again.err;
  EXPECT_NE(again.err.find("already holds a corpus"), std::string::npos) << again.err;
}

TEST(CorpusBuild, BadInputExitsTwoAndCreatesNothing) {
  const fs::path root = test::temp_dir();
  const fs::path out = root / "out";
  struct Case {
    std::string args, says;
  } cases[] = {
      {"--installed none --source " + (root / "missing").string() + " --out " + out.string(), "is not a folder"},
      {"--installed cuda,bogus --out " + out.string(), "unknown source 'bogus'"},
      {"--installed none --out " + out.string(), "nothing to collect"},
      {"--installed none --source " + root.string() + " --out " + out.string() + " --near-threshold 1.5",
       "--near-threshold"},
      {"--installed none --source " + root.string() + " --out " + (root / "no" / "such" / "dir").string(),
       "does not exist"},
      {"--installed none --run-db " + root.string() + " --out " + out.string(), "no run database"},
  };
  for (const Case& c : cases) {
    const auto r = run_kforge("corpus build " + c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(test::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
  const auto s = run_kforge("corpus search foo --corpus " + out.string());
  EXPECT_EQ(s.rc, 2);
  EXPECT_NE(s.err.find("is not a folder"), std::string::npos) << s.err;
  const auto d = run_kforge("corpus describe --corpus " + root.string() + " --llm-url http://127.0.0.1:9 --model m");
  EXPECT_EQ(d.rc, 2);
  EXPECT_NE(d.err.find("holds no corpus"), std::string::npos) << d.err;
  fs::remove_all(root);
}

TEST(CorpusSearch, Fts5FindsTheExpectedChunk) {
  Fixture f;
  ASSERT_EQ(run_kforge(f.build_args()).rc, 0);
  auto r = run_kforge("corpus search quokkaUniqueHelper --corpus " + f.out.string() + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(test::count_lines(r.out), 1) << r.out;
  json hit = json::parse(r.out);
  EXPECT_NE(hit["text"].get<std::string>().find("inline int quokkaUniqueHelper"), std::string::npos);
  EXPECT_EQ(hit["licence"], "unknown");
  // Identifiers with underscores are whole tokens; words combine with AND, --any with OR.
  r = run_kforge("corpus search 'spdx_zebra_kernel blockIdx' --corpus " + f.out.string() + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(test::count_lines(r.out), 1) << r.out;
  EXPECT_NE(json::parse(r.out)["text"].get<std::string>().find("spdx_zebra_kernel"), std::string::npos);
  EXPECT_EQ(json::parse(r.out)["licence"], "Apache-2.0");
  r = run_kforge("corpus search 'spdx_zebra_kernel wombat_unique_kernel' --corpus " + f.out.string() + " --json");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(test::count_lines(r.out), 0) << r.out;
  r = run_kforge("corpus search 'spdx_zebra_kernel wombat_unique_kernel' --any --corpus " + f.out.string() + " --json");
  EXPECT_EQ(test::count_lines(r.out), 2) << r.out;
  // FTS5 syntax in the query is only words.
  r = run_kforge("corpus search '\"quokkaUniqueHelper\" ( * ^ :' --corpus " + f.out.string());
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("plain.hpp"), std::string::npos) << r.out;
}

TEST(CorpusBuild, MachineCudaHeaders) {
  const char* home = std::getenv("CUDA_HOME");
  const fs::path inc = fs::path(home && *home ? home : "/usr/local/cuda") / "include";
  if (!fs::is_directory(inc)) GTEST_SKIP() << "SKIPPED: no CUDA headers at " << inc;
  const fs::path root = test::temp_dir();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_kforge("corpus build --installed cuda --out " + (root / "c").string());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const json sum = json::parse(slurp((root / "c" / "summary.json").string()));
  std::printf("CUDA headers at %s: %lld files (%lld kept, %lld exact and %lld near duplicates), %lld chunks, %.1f MB "
              "of text, in %.1f s\n%s",
              inc.c_str(), sum["files"].get<long long>(), sum["kept"].get<long long>(),
              sum["duplicates"].get<long long>(), sum["near_duplicates"].get<long long>(),
              sum["chunks"].get<long long>(), sum["bytes_out"].get<double>() / 1e6, s, r.out.c_str());
  EXPECT_GT(sum["files"].get<long long>(), 100);
  EXPECT_GT(sum["chunks"].get<long long>(), 1000);
  EXPECT_GT(sum["chunks_by_package"].value("cuda-toolkit", 0), 0);
  // NVIDIA's own headers carry its licence notice; the count of unknown ones is reported.
  EXPECT_GT(sum["chunks_by_licence"].value("LicenseRef-NVIDIA-Licensed-Deliverables", 0), 0) << sum.dump(2);
  const auto q = run_kforge("corpus search 'cudaMemcpyAsync cudaStream_t' --limit 3 --corpus " + (root / "c").string());
  EXPECT_EQ(q.rc, 0);
  EXPECT_NE(q.out.find("1. "), std::string::npos) << q.out;
  fs::remove_all(root);
}

TEST(CorpusBuild, AcceptedCandidatesOfARunDatabase) {
  const fs::path root = test::temp_dir();
  const fs::path run = root / "run";
  fs::create_directories(run);
  {
    ProgramDb db((run / "kforge-search.db").string());
    const int64_t r = db.create_run("hgemm:256x256x256:tn", json::object());
    CandidateRecord good;
    good.run_id = r;
    good.policy = "llm:m";
    good.source = "#include <cuda_fp16.h>\n" + function_named("accepted_candidate_kernel", 7);
    const int64_t g = db.add_candidate(good);
    db.record_verdict(g, json{{"correct", true}}, true, 1.5, 0.4);
    CandidateRecord bad = good;
    bad.source = "#include <cuda_fp16.h>\n" + function_named("rejected_candidate_kernel", 8);
    const int64_t b = db.add_candidate(bad);
    db.record_verdict(b, json{{"correct", false}}, false, 0, -8);
    CandidateRecord py = good;
    py.language = "python";
    py.source = "class ModelNew: pass\n";
    db.record_verdict(db.add_candidate(py), json{{"correct", true}}, true, 1.1, 0.1);
  }
  const auto r = run_kforge("corpus build --installed none --run-db " + run.string() + " --out " +
                            (root / "c").string());
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const auto chunks = read_jsonl((root / "c" / "corpus.jsonl").string());
  ASSERT_EQ(chunks.size(), 1u);  // the correct CUDA candidate only
  EXPECT_NE(chunks[0]["text"].get<std::string>().find("accepted_candidate_kernel"), std::string::npos);
  EXPECT_EQ(chunks[0]["package"], "kforge-candidates");
  EXPECT_NE(chunks[0]["origin"].get<std::string>().find("kforge-search.db#candidate/1:"), std::string::npos)
      << chunks[0]["origin"];
  EXPECT_EQ(chunks[0]["licence"], "unknown");
  fs::remove_all(root);
}

TEST(CorpusBuild, FindsTheInstalledSourcesOrSaysWhyNot) {
  CorpusBuildOptions o;
  std::vector<std::string> notes;
  const auto roots = corpus_roots(o, &notes);
  std::map<std::string, std::vector<SourceRoot>> by;
  for (const SourceRoot& r : roots) by[r.package].push_back(r);
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  ASSERT_EQ(by["kforge"].size(), 1u);  // this source tree
  EXPECT_TRUE(fs::is_regular_file(fs::path(by["kforge"][0].dir) / "dispatch.cpp"));
  auto noted = [&](const char* what) {
    return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.rfind(what, 0) == 0; });
  };
  // Each other source is either found or named in a note.
  EXPECT_TRUE(!by["cuda-toolkit"].empty() || noted("cuda:"));
  EXPECT_TRUE(!by["cutlass"].empty() || noted("cutlass:"));
  EXPECT_TRUE(!by["torch"].empty() || noted("torch:"));
  if (!by["cuda-toolkit"].empty()) EXPECT_FALSE(by["cccl"].empty());
  if (!find_cutlass_include_dirs().empty()) {
    ASSERT_FALSE(by["cutlass"].empty());
    if (!by["cutlass"][0].licence_file.empty())
      EXPECT_EQ(licence_from_text(slurp(by["cutlass"][0].licence_file)), "BSD-3-Clause");
  }
  for (const SourceRoot& t : by["torch"]) {
    EXPECT_TRUE(ends_with_aten(t.dir)) << t.dir;
    EXPECT_FALSE(t.licence_file.empty());
  }
  for (const auto& [package, rs] : by)
    for (const SourceRoot& r : rs) std::printf("%s: %s (licence file: %s)\n", package.c_str(), r.dir.c_str(),
                                               r.licence_file.empty() ? "none" : r.licence_file.c_str());
}

// ---------------------------------------------------------------------------------------------
// describe

int64_t described_rows(const fs::path& corpus) {
  sqlite3* db = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2((corpus / "corpus.sqlite").c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM descriptions", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

void expect_loadable_by_datasets(const std::string& file, size_t rows) {
  const std::string cmd = "python3 -c \"import datasets\" >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::printf("SKIPPED (datasets check only): python3 cannot import datasets\n");
    return;
  }
  const std::string script = "import datasets, sys; ds = datasets.load_dataset('json', data_files='" + file +
                             "', split='train'); print(len(ds), sorted(ds.column_names))";
  const std::string out = file + ".datasets.txt";
  ASSERT_EQ(std::system(("HF_DATASETS_CACHE=" + fs::path(file).parent_path().string() + "/hf python3 -c \"" + script +
                         "\" >" + out + " 2>&1")
                            .c_str()),
            0)
      << slurp(out);
  EXPECT_NE(slurp(out).find(std::to_string(rows) + " ['context_ids', 'id', 'instruction', 'licence', 'model', 'origin', "
                                                   "'package', 'sha256', 'text']"),
            std::string::npos)
      << slurp(out);
}

TEST(CorpusDescribe, AgainstTheScriptedServerThenFromItsCassette) {
  no_proxy_for_loopback();
  Fixture f;
  ASSERT_EQ(run_kforge(f.build_args()).rc, 0);
  ScriptedLlmServer server(ScriptedLlmServer::ok({"Scripted description of a CUDA kernel."}));
  const std::string cassette = (f.root / "describe.cassette.jsonl").string();
  const auto r = run_kforge("corpus describe --corpus " + f.out.string() + " --llm-url " + server.url() +
                            " --model scripted-model --concurrency 3 --record --cassette " + cassette);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(server.request_count(), 10u);
  EXPECT_LE(server.max_in_flight(), 3);
  const auto rows = read_jsonl((f.out / "described.jsonl").string());
  ASSERT_EQ(rows.size(), 10u);
  std::set<std::string> ids;
  for (const json& row : rows) {
    EXPECT_EQ(row["instruction"], "Scripted description of a CUDA kernel.");
    EXPECT_EQ(row["model"], "scripted-model");  // the model asked for
    EXPECT_TRUE(ids.insert(row["id"].get<std::string>()).second);
    EXPECT_TRUE(row["context_ids"].is_array());
  }
  // Every prompt carries its chunk and retrieved neighbours (never the chunk itself).
  bool saw_context = false;
  for (const auto& req : server.requests()) {
    const std::string user = req.body["messages"][1]["content"];
    EXPECT_EQ(req.body["model"], "scripted-model");
    EXPECT_NE(user.find("Describe this code, from "), std::string::npos);
    if (user.find("Related code from the same corpus") != std::string::npos) saw_context = true;
  }
  EXPECT_TRUE(saw_context);
  const json& k0 = *std::find_if(rows.begin(), rows.end(), [](const json& j) {
    return j["text"].get<std::string>().find("fixture_kernel_0(") != std::string::npos;
  });
  ASSERT_FALSE(k0["context_ids"].empty());  // its siblings share most identifiers
  EXPECT_EQ(std::count(k0["context_ids"].begin(), k0["context_ids"].end(), k0["id"]), 0);
  expect_loadable_by_datasets((f.out / "described.jsonl").string(), 10);

  // The same corpus built again, described from the cassette alone: no network, the same output.
  const fs::path out2 = f.root / "corpus2";
  ASSERT_EQ(run_kforge("corpus build --installed none --source " + f.a.string() + " --source " + f.b.string() +
                       " --out " + out2.string() + " --min-chunk-chars 0")
                .rc,
            0);
  const auto rep = run_kforge("corpus describe --corpus " + out2.string() + " --replay --cassette " + cassette +
                              " --concurrency 4");
  ASSERT_EQ(rep.rc, 0) << rep.out << rep.err;
  EXPECT_EQ(server.request_count(), 10u);
  EXPECT_EQ(slurp((out2 / "described.jsonl").string()), slurp((f.out / "described.jsonl").string()));
}

TEST(CorpusDescribe, SpendingCapHoldsAcrossReruns) {
  no_proxy_for_loopback();
  Fixture f;
  ASSERT_EQ(run_kforge(f.build_args()).rc, 0);
  // 10 prompt + 20 completion tokens at 1 USD per 1,000 each: 0.03 USD a call.
  ScriptedLlmServer server(ScriptedLlmServer::ok({"A description."}, 10, 20));
  const std::string common = "corpus describe --corpus " + f.out.string() + " --llm-url " + server.url() +
                             " --model m --concurrency 1 --price-prompt 1 --price-completion 1";
  const auto r = run_kforge(common + " --budget-usd 0.1");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("spending cap"), std::string::npos) << r.err;
  EXPECT_EQ(server.request_count(), 4u);  // 0, 0.03, 0.06, 0.09 < 0.1: four calls
  EXPECT_EQ(described_rows(f.out), 4);
  // The total is stored with the corpus: a rerun with the same cap sends nothing more.
  const auto again = run_kforge(common + " --budget-usd 0.1");
  EXPECT_EQ(again.rc, 1);
  EXPECT_EQ(server.request_count(), 4u);
  const auto more = run_kforge(common + " --budget-usd 1");
  EXPECT_EQ(more.rc, 0) << more.err;
  EXPECT_EQ(server.request_count(), 10u);
  EXPECT_EQ(read_jsonl((f.out / "described.jsonl").string()).size(), 10u);
  // A second describe while one runs is refused (it would pay for the same chunks).
  const int fd = ::open((f.out / ".describe.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const auto busy = run_kforge(common + " --budget-usd 1");
  ::close(fd);
  EXPECT_EQ(busy.rc, 2);
  EXPECT_NE(busy.err.find("another kforge corpus describe is running"), std::string::npos) << busy.err;
  EXPECT_EQ(server.request_count(), 10u);
}

TEST(CorpusDescribe, KillNineMidwayThenRerunLosesAndDuplicatesNothing) {
  no_proxy_for_loopback();
  const fs::path root = test::temp_dir();
  std::string src;
  for (int i = 0; i < 40; ++i) src += function_named("many_kernel_" + std::to_string(i) + "_v" + std::to_string(i * 31), i);
  write(root / "src" / "many.cu", src);
  const fs::path out = root / "corpus";
  ASSERT_EQ(run_kforge("corpus build --installed none --source " + (root / "src").string() + " --out " + out.string() +
                       " --min-chunk-chars 0")
                .rc,
            0);
  ASSERT_EQ(read_jsonl((out / "corpus.jsonl").string()).size(), 40u);
  ScriptedLlmServer server(ScriptedLlmServer::ok({"Slow description."}, 10, 20, /*delay_ms=*/150));
  const std::string log = (root / "first.log").string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(KFORGE_BINARY, KFORGE_BINARY, "corpus", "describe", "--corpus", out.c_str(), "--llm-url",
            server.url().c_str(), "--model", "m", "--concurrency", "2", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait until some descriptions are stored, then kill -9 with calls in flight.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (described_rows(out) < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << slurp(log);
  const int64_t stored = described_rows(out);
  ASSERT_GE(stored, 6);
  ASSERT_LT(stored, 40) << "the run finished before the kill; nothing was tested";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the server finish the killed calls
  const size_t first_requests = server.request_count();
  EXPECT_GE(first_requests, size_t(stored));

  server.set_default(ScriptedLlmServer::ok({"Fast description."}));
  const auto r = run_kforge("corpus describe --corpus " + out.string() + " --llm-url " + server.url() +
                            " --model m --concurrency 2");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  // The rerun asked only for the chunks without a stored description.
  EXPECT_EQ(server.request_count() - first_requests, size_t(40 - stored));
  const auto rows = read_jsonl((out / "described.jsonl").string());
  ASSERT_EQ(rows.size(), 40u);
  std::set<std::string> ids;
  int slow = 0, fast = 0;
  for (const json& row : rows) {
    EXPECT_TRUE(ids.insert(row["id"].get<std::string>()).second) << row["id"];
    slow += row["instruction"] == "Slow description.";
    fast += row["instruction"] == "Fast description.";
  }
  EXPECT_EQ(slow, stored);
  EXPECT_EQ(fast, 40 - stored);
  std::set<std::string> corpus_ids;
  for (const json& c : read_jsonl((out / "corpus.jsonl").string())) corpus_ids.insert(c["id"].get<std::string>());
  EXPECT_EQ(ids, corpus_ids);
  fs::remove_all(root);
}

TEST(CorpusDescribe, CtrlCStopsAfterTheCallsInFlightAndWritesWhatIsStored) {
  no_proxy_for_loopback();
  const fs::path root = test::temp_dir();
  std::string src;
  for (int i = 0; i < 30; ++i) src += function_named("intr_kernel_" + std::to_string(i) + "_w" + std::to_string(i * 17), i);
  write(root / "src" / "intr.cu", src);
  const fs::path out = root / "corpus";
  ASSERT_EQ(run_kforge("corpus build --installed none --source " + (root / "src").string() + " --out " + out.string() +
                       " --min-chunk-chars 0")
                .rc,
            0);
  ScriptedLlmServer server(ScriptedLlmServer::ok({"Described."}, 10, 20, /*delay_ms=*/100));
  const std::string log = (root / "first.log").string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(KFORGE_BINARY, KFORGE_BINARY, "corpus", "describe", "--corpus", out.c_str(), "--llm-url",
            server.url().c_str(), "--model", "m", "--concurrency", "2", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (described_rows(out) < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << slurp(log);
  EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(log);
  EXPECT_NE(slurp(log).find("stopping after the calls in flight"), std::string::npos) << slurp(log);
  const int64_t stored = described_rows(out);
  ASSERT_LT(stored, 30);
  // Every call that was sent got its answer stored (none was in flight when it ended).
  EXPECT_EQ(server.request_count(), size_t(stored));
  EXPECT_EQ(read_jsonl((out / "described.jsonl").string()).size(), size_t(stored));
  server.set_default(ScriptedLlmServer::ok({"Described."}));
  const auto r = run_kforge("corpus describe --corpus " + out.string() + " --llm-url " + server.url() + " --model m");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(server.request_count(), 30u);
  EXPECT_EQ(read_jsonl((out / "described.jsonl").string()).size(), 30u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace kforge
