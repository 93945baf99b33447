// Tests of the repair the importers apply to a record simdjson refused for one character
// (src/importers/json_text): invalid UTF-8 bytes and lone surrogate escapes become U+FFFD,
// everything else stays byte for byte. The expected texts are written out by hand.
#include <gtest/gtest.h>

#include <string>

#include "importers/json_text.h"

namespace grademl::importers {
namespace {

// The text after ReplaceLoneSurrogateEscapes, and how many it replaced.
std::pair<std::string, size_t> Surrogates(std::string text) {
  size_t n = ReplaceLoneSurrogateEscapes(text.data(), text.size());
  return {text, n};
}

TEST(JsonTextTest, LoneSurrogateEscapesBecomeTheReplacementCharactersEscape) {
  using R = std::pair<std::string, size_t>;
  EXPECT_EQ(Surrogates(R"("a\ud800b")"), (R{R"("a\ufffdb")", 1}));        // a lone high one
  EXPECT_EQ(Surrogates(R"("a\udc00b")"), (R{R"("a\ufffdb")", 1}));        // a lone low one
  EXPECT_EQ(Surrogates(R"("x\uDBFF")"), (R{R"("x\ufffd")", 1}));          // upper case, at the end
  EXPECT_EQ(Surrogates(R"("\ud800\u0041")"), (R{R"("\ufffd\u0041")", 1}));  // followed by no low one
  // A high one before a pair: it alone is lone; the pair stays.
  EXPECT_EQ(Surrogates(R"("\ud800\ud83d\ude00")"), (R{R"("\ufffd\ud83d\ude00")", 1}));
  // A pair reversed: both lone.
  EXPECT_EQ(Surrogates(R"("\ude00\ud83d")"), (R{R"("\ufffd\ufffd")", 2}));
  // Left alone: a pair, other escapes, an escaped backslash before "ud800", a cut escape.
  EXPECT_EQ(Surrogates(R"("\ud83d\ude00 \u00e9 \n \" \\ud800 \\")"), (R{R"("\ud83d\ude00 \u00e9 \n \" \\ud800 \\")", 0}));
  EXPECT_EQ(Surrogates(R"("\ud8)"), (R{R"("\ud8)", 0}));
  EXPECT_EQ(Surrogates(R"(\)"), (R{R"(\)", 0}));
  // In a key and in a value of one object.
  EXPECT_EQ(Surrogates(R"({"k\udfff": "v\ud801"})"), (R{R"({"k\ufffd": "v\ufffd"})", 2}));
}

TEST(JsonTextTest, RepairReplacesEachInvalidByteAndEachLoneSurrogate) {
  std::string out;
  EXPECT_FALSE(RepairJsonText(R"({"name": "plain \u00e9 é \ud83d\ude00"})", &out));
  ASSERT_TRUE(RepairJsonText("{\"n\": \"a\xff" "b\"}", &out));
  EXPECT_EQ(out, "{\"n\": \"a\xEF\xBF\xBD" "b\"}");
  // A sequence cut short: each of its bytes.
  ASSERT_TRUE(RepairJsonText("\"\xE2\x82\"", &out));
  EXPECT_EQ(out, "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  // An overlong '/' and an encoded surrogate: each byte.
  ASSERT_TRUE(RepairJsonText("\"\xC0\xAF\"", &out));
  EXPECT_EQ(out, "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  ASSERT_TRUE(RepairJsonText("\"\xED\xA0\x80\"", &out));
  EXPECT_EQ(out, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  // Both at once; valid multi-byte text around them kept.
  ASSERT_TRUE(RepairJsonText("[\"\xC3\xA9\xFE\\ud800\xE2\x82\xAC\"]", &out));
  EXPECT_EQ(out, "[\"\xC3\xA9\xEF\xBF\xBD\\ufffd\xE2\x82\xAC\"]");
  // Damage of another kind is left for the parser to report.
  ASSERT_TRUE(RepairJsonText("{\"a\": \"\\q\xff\"", &out));
  EXPECT_EQ(out, "{\"a\": \"\\q\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace grademl::importers
