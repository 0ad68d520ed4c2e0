// Parsing LLM answers (fenced code, SEARCH/REPLACE edits, analysis) and applying edits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm/response.hpp"

namespace kforge {
namespace {

// ---------------------------------------------------------------------------------------------
// parse_response: code

TEST(ParseResponse, CodeFromCudaBlockAndAnalysisAround) {
  ParsedResponse r = parse_response(
      "## Performance Analysis\n"
      "Variant 3 is faster because it uses shared memory.\n"
      "\n"
      "```cuda\n"
      "__global__ void k() {}\n"
      "```\n"
      "That is all.\n");
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, "__global__ void k() {}\n");
  EXPECT_TRUE(r.edits.empty());
  EXPECT_TRUE(r.error.empty());
  EXPECT_EQ(r.analysis,
            "## Performance Analysis\nVariant 3 is faster because it uses shared memory.\n\nThat is all.");
}

TEST(ParseResponse, LastCodeBlockWinsAndNonCodeTagsAreAnalysis) {
  ParsedResponse r = parse_response(
      "First try:\n"
      "```cpp\nint first;\n```\n"
      "Some output:\n"
      "```text\nnot code\n```\n"
      "```json\n{\"a\": 1}\n```\n"
      "Final:\n"
      "~~~cu\nint last;\n~~~\n"
      "```diff\n- a\n+ b\n```\n");
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, "int last;\n");
  // Non-code blocks stay in the analysis with their fences; code blocks do not.
  EXPECT_NE(r.analysis.find("```text\nnot code\n```"), std::string::npos);
  EXPECT_NE(r.analysis.find("{\"a\": 1}"), std::string::npos);
  EXPECT_NE(r.analysis.find("+ b"), std::string::npos);
  EXPECT_EQ(r.analysis.find("int first"), std::string::npos);
  EXPECT_EQ(r.analysis.find("int last"), std::string::npos);
}

TEST(ParseResponse, AcceptedTags) {
  for (const char* tag : {"cuda", "CUDA", "cu", "c++", "cpp", "cxx", "c", "", "cuda title=\"k.cu\""}) {
    ParsedResponse r = parse_response(std::string("```") + tag + "\nint x;\n```\n");
    ASSERT_TRUE(r.code.has_value()) << "tag '" << tag << "'";
    EXPECT_EQ(*r.code, "int x;\n");
  }
  for (const char* tag : {"text", "json", "diff", "python", "bash"}) {
    ParsedResponse r = parse_response(std::string("```") + tag + "\nint x;\n```\n");
    EXPECT_FALSE(r.code.has_value()) << "tag '" << tag << "'";
    EXPECT_FALSE(r.error.empty());
    EXPECT_NE(r.error.find(std::string("'") + tag + "'"), std::string::npos) << r.error;
  }
}

TEST(ParseResponse, PythonLanguageTakesPythonBlocksAndEdits) {
  for (const char* tag : {"python", "Python", "py", "python3", ""}) {
    ParsedResponse r = parse_response(std::string("```") + tag + "\nclass ModelNew: pass\n```\n", "python");
    ASSERT_TRUE(r.code.has_value()) << "tag '" << tag << "'";
    EXPECT_EQ(*r.code, "class ModelNew: pass\n");
  }
  // A CUDA block shown alongside is analysis; the python file is the program.
  ParsedResponse both = parse_response("```python\nx = 1\n```\n```cuda\n__global__ void k() {}\n```\n", "python");
  ASSERT_TRUE(both.code.has_value());
  EXPECT_EQ(*both.code, "x = 1\n");
  EXPECT_NE(both.analysis.find("__global__"), std::string::npos);
  ParsedResponse cuda_only = parse_response("```cuda\nint x;\n```\n", "python");
  EXPECT_FALSE(cuda_only.code.has_value());
  EXPECT_NE(cuda_only.error.find("tag the program `python`"), std::string::npos) << cuda_only.error;
  ParsedResponse edits =
      parse_response("```python\n<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n```\n", "python");
  EXPECT_FALSE(edits.code.has_value());
  ASSERT_EQ(edits.edits.size(), 1u);
  EXPECT_EQ(edits.edits[0].replace, "a = 2\n");
}

TEST(ParseResponse, LongerFenceHoldsShorterOnesAndInlineBackticksAreNotFences) {
  ParsedResponse r = parse_response(
      "```inline``` code\n"
      "````cuda\n"
      "// ```\n"
      "```cuda\n"
      "int y;\n"
      "````\n");
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, "// ```\n```cuda\nint y;\n");
  EXPECT_EQ(r.analysis, "```inline``` code");
}

TEST(ParseResponse, WindowsLineEndingsAndBlankLinesInsideBlock) {
  ParsedResponse r = parse_response("Analysis.\r\n```cuda\r\n\r\n\r\n  int a;\r\nint b;\r\n\r\n```\r\n");
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, "  int a;\nint b;\n");  // indentation of the first line kept
  EXPECT_EQ(r.analysis, "Analysis.");
}

TEST(ParseResponse, UnterminatedFinalFenceIsCode) {
  ParsedResponse r = parse_response("Here it is:\n```cuda\nint a;\nint b;\n");
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, "int a;\nint b;\n");
  EXPECT_EQ(r.analysis, "Here it is:");
  EXPECT_TRUE(r.error.empty());
}

TEST(ParseResponse, NoCodeIsAnError) {
  ParsedResponse r = parse_response("I think the kernel is already optimal.\n");
  EXPECT_FALSE(r.code.has_value());
  EXPECT_TRUE(r.edits.empty());
  EXPECT_NE(r.error.find("no fenced code block and no SEARCH/REPLACE edit in the response"),
            std::string::npos);
  EXPECT_EQ(r.analysis, "I think the kernel is already optimal.");

  // An empty code block is no code either.
  EXPECT_FALSE(parse_response("```cuda\n\n```\n").error.empty());
}

// ---------------------------------------------------------------------------------------------
// parse_response: edits

TEST(ParseResponse, EditsOutsideFences) {
  ParsedResponse r = parse_response(
      "Change the tile size.\n"
      "<<<<<<< SEARCH\n"
      "constexpr int kTile = 32;\n"
      "=======\n"
      "constexpr int kTile = 64;\n"
      ">>>>>>> REPLACE\n"
      "And remove the sync:\n"
      "<<<<<<< SEARCH\n"
      "  __syncthreads();\n"
      "=======\n"
      ">>>>>>> REPLACE\n"
      "Done.\n");
  EXPECT_FALSE(r.code.has_value());
  ASSERT_EQ(r.edits.size(), 2u);
  EXPECT_EQ(r.edits[0].search, "constexpr int kTile = 32;\n");
  EXPECT_EQ(r.edits[0].replace, "constexpr int kTile = 64;\n");
  EXPECT_EQ(r.edits[1].search, "  __syncthreads();\n");
  EXPECT_EQ(r.edits[1].replace, "");
  EXPECT_TRUE(r.error.empty());
  EXPECT_EQ(r.analysis, "Change the tile size.\nAnd remove the sync:\nDone.");
}

TEST(ParseResponse, EditsInsideFenceAreEditsNotCode) {
  ParsedResponse r = parse_response(
      "Analysis.\n"
      "```cuda\n"
      "<<<<<<< SEARCH\n"
      "int a = 1;\n"
      "=======\n"
      "int a = 2;\n"
      ">>>>>>> REPLACE\n"
      "\n"
      "<<<<<<< SEARCH\n"
      "int b = 1;\n"
      "=======\n"
      "int b = 2;\n"
      ">>>>>>> REPLACE\n"
      "```\n");
  EXPECT_FALSE(r.code.has_value());
  ASSERT_EQ(r.edits.size(), 2u);
  EXPECT_EQ(r.edits[0].search, "int a = 1;\n");
  EXPECT_EQ(r.edits[1].replace, "int b = 2;\n");
  EXPECT_EQ(r.analysis, "Analysis.");
}

TEST(ParseResponse, EditsInADiffTaggedFenceAndCrlf) {
  ParsedResponse r = parse_response(
      "```diff\r\n<<<<<<< SEARCH\r\nx();\r\n=======\r\ny();\r\n>>>>>>> REPLACE\r\n```\r\n");
  ASSERT_EQ(r.edits.size(), 1u);
  EXPECT_EQ(r.edits[0].search, "x();\n");
  EXPECT_EQ(r.edits[0].replace, "y();\n");
  EXPECT_FALSE(r.code.has_value());
}

TEST(ParseResponse, CodeAndEditsBothKept) {
  ParsedResponse r = parse_response(
      "<<<<<<< SEARCH\nold();\n=======\nnew_();\n>>>>>>> REPLACE\n"
      "Or the whole file:\n"
      "```cuda\nint whole;\n```\n");
  ASSERT_TRUE(r.code.has_value());
  EXPECT_EQ(*r.code, "int whole;\n");
  ASSERT_EQ(r.edits.size(), 1u);
  EXPECT_EQ(r.edits[0].search, "old();\n");
}

TEST(ParseResponse, TruncatedEditIsDroppedAndExplained) {
  ParsedResponse r = parse_response("<<<<<<< SEARCH\nint a;\n=======\nint b;\n");
  EXPECT_TRUE(r.edits.empty());
  EXPECT_NE(r.error.find("cut off"), std::string::npos) << r.error;

  // A complete edit before the truncated one survives.
  r = parse_response(
      "<<<<<<< SEARCH\na;\n=======\nb;\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nc;\n");
  ASSERT_EQ(r.edits.size(), 1u);
  EXPECT_EQ(r.edits[0].replace, "b;\n");
  EXPECT_TRUE(r.error.empty());
}

// ---------------------------------------------------------------------------------------------
// apply_edits

const std::string kParent =
    "#include <cuda_fp16.h>\n"
    "\n"
    "constexpr int kTile = 32;\n"
    "\n"
    "__global__ void gemm(const half* a) {\n"
    "  float acc = 0.f;\n"
    "  for (int k = 0; k < 8; ++k) {\n"
    "    acc += 1.f;\n"
    "  }\n"
    "  __syncthreads();\n"
    "}\n";

TEST(ApplyEdits, ExactMatch) {
  EditOutcome r = apply_edits(kParent, {{"constexpr int kTile = 32;\n", "constexpr int kTile = 64;\n"}});
  ASSERT_TRUE(r.ok) << r.error;
  std::string want = kParent;
  want.replace(want.find("= 32"), 4, "= 64");
  EXPECT_EQ(r.source, want);
}

TEST(ApplyEdits, NoEditsGiveTheParent) {
  EditOutcome r = apply_edits(kParent, {});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.source, kParent);
}

TEST(ApplyEdits, TolerantWhitespaceAndBlankLines) {
  // Indentation differs, trailing spaces, and a blank line in SEARCH that the source lacks.
  EditOutcome r = apply_edits(kParent, {{"for (int k = 0; k < 8; ++k) {   \n"
                                         "\n"
                                         "        acc += 1.f;\n"
                                         "}\n",
                                         "  #pragma unroll\n"
                                         "  for (int k = 0; k < 8; ++k) acc += 2.f;\n"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.source,
            "#include <cuda_fp16.h>\n"
            "\n"
            "constexpr int kTile = 32;\n"
            "\n"
            "__global__ void gemm(const half* a) {\n"
            "  float acc = 0.f;\n"
            "  #pragma unroll\n"  // the replacement's indentation, as written
            "  for (int k = 0; k < 8; ++k) acc += 2.f;\n"
            "  __syncthreads();\n"
            "}\n");
}

TEST(ApplyEdits, TolerantMatchSpansBlankSourceLines) {
  EditOutcome r = apply_edits(kParent, {{"#include <cuda_fp16.h>\nconstexpr int kTile = 32;\n",
                                         "#include <cuda_fp16.h>\nconstexpr int kTile = 16;\n"}});
  ASSERT_TRUE(r.ok) << r.error;
  const std::string want = "#include <cuda_fp16.h>\nconstexpr int kTile = 16;\n\n__global__";
  EXPECT_EQ(r.source.substr(0, want.size()), want);
}

TEST(ApplyEdits, LastLineWithoutNewline) {
  EditOutcome r = apply_edits("int a;\nint b;", {{"int b;\n", "int c;\n"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.source, "int a;\nint c;");
}

TEST(ApplyEdits, ExactMatchMustStartALine) {
  // "x = 1;" is the end of "int x = 1;", not a line of its own: no match.
  EditOutcome r = apply_edits("int x = 1;\n", {{"x = 1;\n", "x = 2;\n"}});
  EXPECT_FALSE(r.ok);
}

TEST(ApplyEdits, NotFoundSaysWhichEditAndFirstLine) {
  EditOutcome r = apply_edits(kParent, {{"constexpr int kTile = 32;\n", "constexpr int kTile = 64;\n"},
                                        {"float acc = 0.f;\n", "float acc = 1.f;\n"},
                                        {"  int missing = 3;\n  more();\n", "x\n"}});
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.source.empty());
  EXPECT_NE(r.error.find("edit 3 of 3: the SEARCH text was not found in the parent after edits 1-2; "
                         "its first line was: int missing = 3;"),
            std::string::npos)
      << r.error;
}

TEST(ApplyEdits, NotFoundExplainsNearMiss) {
  EditOutcome r = apply_edits(kParent, {{"float acc = 0.f;\nfor (int k = 0; k < 16; ++k) {\n", "x\n"}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("edit 1 of 1: the SEARCH text was not found in the parent; its first line "
                         "was: float acc = 0.f;"),
            std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("from line 6"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("line 7 is 'for (int k = 0; k < 8; ++k) {'"), std::string::npos) << r.error;
}

TEST(ApplyEdits, AmbiguousExactAndTolerant) {
  const std::string src = "a();\nb();\na();\nc();\n  a();\n";
  EditOutcome r = apply_edits(src, {{"a();\n", "z();\n"}});
  EXPECT_FALSE(r.ok);
  // Exact: lines 1 and 3 (line 5 is indented, so not an exact line match).
  EXPECT_NE(r.error.find("edit 1 of 1: the SEARCH text matches 2 places in the parent (lines 1, 3); "
                         "add more context"),
            std::string::npos)
      << r.error;

  // Tolerant: all three.
  r = apply_edits(src, {{"   a();\n", "z();\n"}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("matches 3 places"), std::string::npos) << r.error;

  // More context makes it unique.
  r = apply_edits(src, {{"a();\nc();\n", "z();\n"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.source, "a();\nb();\nz();\n  a();\n");
}

TEST(ApplyEdits, SequentialEditsSeeEarlierOnes) {
  // Edit 2 searches for text that only exists after edit 1.
  EditOutcome r = apply_edits(kParent, {{"constexpr int kTile = 32;\n", "constexpr int kTile = 64;\n"
                                                                         "constexpr int kStages = 2;\n"},
                                        {"constexpr int kStages = 2;\n", "constexpr int kStages = 4;\n"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NE(r.source.find("constexpr int kTile = 64;\nconstexpr int kStages = 4;\n"), std::string::npos);

  // In the other order, edit 1 cannot find its text.
  r = apply_edits(kParent, {{"constexpr int kStages = 2;\n", "constexpr int kStages = 4;\n"},
                            {"constexpr int kTile = 32;\n", "constexpr int kTile = 64;\n"}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("edit 1 of 2: the SEARCH text was not found in the parent;"), std::string::npos)
      << r.error;
}

TEST(ApplyEdits, EmptySearchIsRejected) {
  EditOutcome r = apply_edits(kParent, {{"\n  \n", "int x;\n"}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("edit 1 of 1: the SEARCH text is empty"), std::string::npos) << r.error;
}

TEST(ApplyEdits, ParseThenApply) {
  ParsedResponse p = parse_response(
      "Bigger tiles.\r\n```cuda\r\n<<<<<<< SEARCH\r\n  constexpr int kTile = 32;\r\n=======\r\n"
      "constexpr int kTile = 128;\r\n>>>>>>> REPLACE\r\n```\r\n");
  ASSERT_EQ(p.edits.size(), 1u);
  EditOutcome r = apply_edits(kParent, p.edits);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NE(r.source.find("\nconstexpr int kTile = 128;\n"), std::string::npos);
}

}  // namespace
}  // namespace kforge
