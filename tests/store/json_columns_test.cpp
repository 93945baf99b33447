#include "store/json_columns.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace grademl::store {
namespace {

TEST(JsonColumnsTest, EncodesCompactJson) {
  EXPECT_EQ(EncodeStringArray({}), "[]");
  EXPECT_EQ(EncodeStringArray({"python", "a b", "q\"\\", "\n\t\x01"}),
            R"(["python","a b","q\"\\","\n\t\u0001"])");
  EXPECT_EQ(EncodeTags({}), "{}");
  EXPECT_EQ(EncodeTags({{"epoch", "3"}, {"k", "v\""}}), R"({"epoch":"3","k":"v\""})");
}

TEST(JsonColumnsTest, RoundTripsArbitraryBytes) {
  std::vector<std::string> items = {"", "plain", "ünïcødé 😀", "bad \xff\xfe\xc3 utf8", std::string("nul\0x", 5),
                                    "\x7f\x1f\b\f\r/"};
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  items.push_back(all);
  auto decoded = DecodeStringArray(EncodeStringArray(items));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(*decoded, items);

  model::Tags tags = {{"a", "1"}, {"a", "2"}, {"", ""}, {"k\"ey", all}, {"z", "last"}};
  auto decoded_tags = DecodeTags(EncodeTags(tags));
  ASSERT_TRUE(decoded_tags.ok()) << decoded_tags.status().message();
  EXPECT_EQ(*decoded_tags, tags);  // order and duplicates kept
}

TEST(JsonColumnsTest, OutputIsStandardJson) {
  std::vector<std::string> items = {"x", "ünï", "q\"\\", std::string("\0\x1f", 2)};
  auto parsed = nlohmann::json::parse(EncodeStringArray(items));
  EXPECT_EQ(parsed.get<std::vector<std::string>>(), items);
  auto obj = nlohmann::ordered_json::parse(EncodeTags({{"b", "1"}, {"a", "\t"}}));
  EXPECT_EQ(obj.dump(), R"({"b":"1","a":"\t"})");
}

TEST(JsonColumnsTest, ReadsJsonWrittenByOthers) {
  // As nlohmann, SQLite's json functions or a person might write it.
  auto a = DecodeStringArray(" [ \"a\\/b\" , \"\\u00e9\\uD83D\\uDE00\" , \"\\\"\" ]\n");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (std::vector<std::string>{"a/b", "é😀", "\""}));
  nlohmann::json j = {"x", "ÿ", "\x01"};
  EXPECT_EQ(DecodeStringArray(j.dump()).value(), (std::vector<std::string>{"x", "ÿ", "\x01"}));
  auto t = DecodeTags("{ \"k\" : \"v\" ,\"\\u0041\":\"\"}");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, (model::Tags{{"k", "v"}, {"A", ""}}));
}

TEST(JsonColumnsTest, RejectsMalformedText) {
  for (const char* bad : {"", "[", "]", "[\"a\"", "[\"a\",]", "[\"a\" \"b\"]", "[1]", "[\"a\"] x", "[\"\\x\"]",
                          "[\"\\u12\"]", "[\"\\uZZZZ\"]", "[\"\\ud800\"]", "[\"\\udc00\"]", "[\"\\ud800\\u0041\"]",
                          "[\"a\nb\"]", "{}", "[\"unterminated]", "null"}) {
    auto r = DecodeStringArray(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_EQ(r.status().message().rfind("bad JSON at byte ", 0), 0u) << r.status().message();
  }
  for (const char* bad : {"", "{", "[]", "{\"a\"}", "{\"a\":}", "{\"a\":1}", "{\"a\":\"b\",}", "{\"a\":\"b\"}}"}) {
    EXPECT_EQ(DecodeTags(bad).status().code(), StatusCode::kCorrupt) << bad;
  }
}

}  // namespace
}  // namespace grademl::store
