#include <gtest/gtest.h>

#include <limits>

#include "collect/process_tree_monitor.h"

namespace grademl::collect {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ShareOutTest, NeedsFirstThenByWeight) {
  std::vector<Claim> claims = {{.need = 1, .weight = 1, .cap = kInf}, {.need = 2, .weight = 3, .cap = kInf}};
  EXPECT_DOUBLE_EQ(ShareOut(7, claims), 0);
  EXPECT_DOUBLE_EQ(claims[0].granted, 2);  // 1 + 4 * 1/4
  EXPECT_DOUBLE_EQ(claims[1].granted, 5);  // 2 + 4 * 3/4
}

TEST(ShareOutTest, ShortTotalScalesNeeds) {
  std::vector<Claim> claims = {{.need = 2, .weight = 1, .cap = kInf}, {.need = 6, .weight = 1, .cap = kInf}};
  EXPECT_DOUBLE_EQ(ShareOut(4, claims), 0);
  EXPECT_DOUBLE_EQ(claims[0].granted, 1);
  EXPECT_DOUBLE_EQ(claims[1].granted, 3);
}

TEST(ShareOutTest, CapsSpillToOthersAndTheRestIsLeftOver) {
  std::vector<Claim> claims = {{.need = 0, .weight = 9, .cap = 1}, {.need = 0, .weight = 1, .cap = 2}};
  // 10 to share: the first is capped at 1, the second at 2; 7 is left for nobody.
  EXPECT_DOUBLE_EQ(ShareOut(10, claims), 7);
  EXPECT_DOUBLE_EQ(claims[0].granted, 1);
  EXPECT_DOUBLE_EQ(claims[1].granted, 2);
}

TEST(ShareOutTest, WaterFillingRedistributesPastACap) {
  std::vector<Claim> claims = {{.need = 0, .weight = 1, .cap = 0.5}, {.need = 0, .weight = 1, .cap = kInf}};
  EXPECT_DOUBLE_EQ(ShareOut(3, claims), 0);
  EXPECT_DOUBLE_EQ(claims[0].granted, 0.5);
  EXPECT_DOUBLE_EQ(claims[1].granted, 2.5);
}

TEST(ShareOutTest, NoClaimantsLeavesEverything) {
  std::vector<Claim> claims;
  EXPECT_DOUBLE_EQ(ShareOut(3, claims), 3);
}

}  // namespace
}  // namespace grademl::collect
