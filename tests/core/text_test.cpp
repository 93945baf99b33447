#include "core/text.h"

#include <gtest/gtest.h>

namespace grademl {
namespace {

TEST(TextTest, EscapeControlShowsEveryControlCharacter) {
  EXPECT_EQ(EscapeControl("plain name"), "plain name");
  EXPECT_EQ(EscapeControl("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(EscapeControl("\033[31mred\033[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(EscapeControl(std::string_view("\x01\x7f", 2)), "\\x01\\x7f");
  EXPECT_EQ(EscapeControl("\xc2\x9b" "2J"), "\\u009b2J");  // C1 CSI
  EXPECT_EQ(EscapeControl("héllo → ok"), "héllo → ok");
  EXPECT_EQ(EscapeControl("back\\slash"), "back\\slash");
}

TEST(TextTest, EscapeControlRepairsInvalidUtf8) {
  EXPECT_EQ(EscapeControl("a\xff" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
}

}  // namespace
}  // namespace grademl
