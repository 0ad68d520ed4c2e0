#include <gtest/gtest.h>

#include <fstream>

#include "core/error.hpp"
#include "core/shapes.hpp"
#include "measure/timer.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

TEST(Shapes, ParsesMxNxK) {
  EXPECT_EQ(parse_shape("4096x4096x64"), (Shape{4096, 4096, 64}));
  EXPECT_EQ(parse_shape(" 1x2x3 "), (Shape{1, 2, 3}));
  EXPECT_EQ(parse_shape("7,8,9"), (Shape{7, 8, 9}));
  EXPECT_EQ(parse_shape("64x128x256").str(), "64x128x256");
  EXPECT_DOUBLE_EQ(parse_shape("64x128x256").flops(), 2.0 * 64 * 128 * 256);
}

TEST(Shapes, RejectsBadShapesWithTheOffendingText) {
  for (const char* bad : {"0x64x64", "-5x64x64", "64xax64", "64x64", "64x64x64x64", "", "64x64x", "1.5x2x3",
                          "64x64x99999999999"}) {
    try {
      parse_shape(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
      EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
    }
  }
}

TEST(Shapes, ListAndGrid) {
  auto list = parse_shape_list("64x64x64,128x256x512");
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1], (Shape{128, 256, 512}));
  auto grid = default_grid();
  ASSERT_EQ(grid.size(), 1000u);
  EXPECT_EQ(grid.front(), (Shape{64, 64, 64}));
  EXPECT_EQ(grid[1], (Shape{64, 64, 128}));
  EXPECT_EQ(grid.back(), (Shape{16384, 16384, 16384}));
  EXPECT_EQ(resolve_shapes("grid").size(), 1000u);
  EXPECT_THROW(parse_shape_list(""), Error);
}

TEST(Shapes, FileWithCommentsAndCsvHeader) {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/shapes.csv";
  {
    std::ofstream f(path);
    f << "M,N,K,extra\n# a comment\n\n64,128,256,x\n512x512x512  # trailing comment\n";
  }
  auto shapes = resolve_shapes(path);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0], (Shape{64, 128, 256}));
  EXPECT_EQ(shapes[1], (Shape{512, 512, 512}));
  EXPECT_EQ(resolve_shapes("@" + path).size(), 2u);
  {
    std::ofstream f(path);
    f << "64x64x64\n64x0x64\n";
  }
  try {
    load_shape_file(path);
    ADD_FAILURE() << "accepted a zero extent";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_shape_file(dir + "/missing.txt"), Error);
}

TEST(Shapes, LayoutsAccModes) {
  EXPECT_EQ(parse_layouts("nn,tn").size(), 2u);
  EXPECT_EQ(parse_layouts("tn,tn").size(), 1u);
  EXPECT_EQ(parse_layout("tn"), Layout::kTN);
  EXPECT_THROW(parse_layout("nt"), Error);
  EXPECT_EQ(parse_acc("f16"), Acc::kF16);
  EXPECT_THROW(parse_acc("f64"), Error);
  EXPECT_EQ(parse_mode("graph"), Mode::kGraph);
  EXPECT_EQ(to_string(Mode::kServer), "server");
  EXPECT_THROW(parse_mode("fast"), Error);
}

}  // namespace
}  // namespace kforge
