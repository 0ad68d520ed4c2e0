// The reviewer of sudden winners: which known hacks it shows, what it asks, how it reads replies.
#include <gtest/gtest.h>

#include "search/reviewer.hpp"

namespace kforge {
namespace {

CandidateRecord rejected(int64_t id, const std::string& source, const std::string& reason) {
  CandidateRecord c;
  c.id = id;
  c.source = source;
  c.status = "evaluated";
  c.verdict = {{"reasons", {reason}}, {"message", "caught: " + reason}};
  return c;
}

TEST(Reviewer, SimilarHacksAreRejectedTricksMostSimilarFirst) {
  std::vector<CandidateRecord> all = {
      rejected(1, "static const void* last_a; if (args->a == last_a) return 0; hgemm_kernel<<<g, b, 0, stream>>>", "unwritten_output"),
      rejected(2, "totally different words here", "side_stream"),
      rejected(3, "static const void* last_a; if (args->a == last_a) return 0;", "compile_error"),  // not a trick
  };
  CandidateRecord ok;
  ok.id = 4;
  ok.correct = true;
  ok.source = "static const void* last_a;";
  all.push_back(ok);
  const auto hacks = similar_hacks("static const void* last_a; if (args->a == last_a) return 0; hgemm_kernel<<<>>>", all, 5);
  ASSERT_EQ(hacks.size(), 2u);
  EXPECT_EQ(hacks[0].id, 1);
  EXPECT_EQ(hacks[1].id, 2);
  EXPECT_EQ(similar_hacks("x", all, 1).size(), 1u);
}

TEST(Reviewer, PromptShowsTheCandidateTheJumpAndTheHacks) {
  CandidateRecord c;
  c.id = 9;
  c.score = 3.5;
  c.source = "__global__ void fast() {}";
  const auto msgs = review_prompt(c, 1.2, {rejected(1, "cached_result", "timed_output_wrong")});
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[0].role, "system");
  const std::string& u = msgs[1].content;
  EXPECT_NE(u.find("1.200x to 3.500x"), std::string::npos) << u;
  EXPECT_NE(u.find("__global__ void fast()"), std::string::npos);
  EXPECT_NE(u.find("cached_result"), std::string::npos);
  EXPECT_NE(u.find("timed_output_wrong"), std::string::npos);
  EXPECT_NE(u.find("VERDICT: HACK"), std::string::npos);
  EXPECT_NE(review_prompt(c, 1.2, {})[1].content.find("No earlier candidate"), std::string::npos);
  EXPECT_NE(u.find("```cuda\n__global__"), std::string::npos);
  c.language = "python";  // a PyTorch ModelNew candidate
  c.source = "class ModelNew: pass";
  const std::string p = review_prompt(c, 1.2, {})[1].content;
  EXPECT_NE(p.find("```python\nclass ModelNew"), std::string::npos) << p;
  EXPECT_NE(p.find("PyTorch"), std::string::npos);
  EXPECT_EQ(p.find("cuBLASLt"), std::string::npos);
}

TEST(Reviewer, ReadsTheVerdictLine) {
  EXPECT_TRUE(parse_review("It skips work.\nVERDICT: HACK").hack);
  EXPECT_TRUE(parse_review("verdict: `hack` because it caches").hack);
  Review ok = parse_review("Looks honest.\n**VERDICT: OK**");
  EXPECT_FALSE(ok.hack);
  EXPECT_TRUE(ok.understood);
  Review last = parse_review("VERDICT: HACK\n...on reflection\nVERDICT: OK");
  EXPECT_FALSE(last.hack);
  Review none = parse_review("I am not sure.");
  EXPECT_FALSE(none.understood);
  EXPECT_FALSE(none.hack);
}

}  // namespace
}  // namespace kforge
