#include "store/json_columns.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <limits>

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

TEST(JsonColumnsTest, ArtifactsRoundTripAndAreStandardJson) {
  EXPECT_EQ(EncodeArtifacts({}), "[]");
  std::vector<model::StepArtifact> artifacts = {
      {.path = "data/train.csv", .hash = "ab12", .size = 42, .directory = false},
      {.path = "models", .hash = "", .size = std::numeric_limits<int64_t>::max(), .directory = true},
      {.path = "params.yaml:train.lr", .hash = "cd", .size = -1},
      {.path = std::string("q\"\\ ünï \xff nul\0", 16), .hash = "", .size = std::numeric_limits<int64_t>::min()},
      {},
  };
  EXPECT_EQ(EncodeArtifacts({artifacts[0]}), R"([{"path":"data/train.csv","hash":"ab12","size":42,"directory":false}])");
  auto decoded = DecodeArtifacts(EncodeArtifacts(artifacts));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(*decoded, artifacts);
  // As SQLite's json functions and nlohmann read it.
  auto parsed = nlohmann::json::parse(EncodeArtifacts({artifacts[0], artifacts[1]}));
  EXPECT_EQ(parsed[1]["directory"], true);
  EXPECT_EQ(parsed[1]["size"].get<int64_t>(), std::numeric_limits<int64_t>::max());
  // Written by others: keys in any order, whitespace, a key left out.
  auto other = DecodeArtifacts(R"( [ { "size" : 7 , "directory":true, "path":"a\/b" } , {} ] )");
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_EQ(*other, (std::vector<model::StepArtifact>{{.path = "a/b", .size = 7, .directory = true}, {}}));
}

TEST(JsonColumnsTest, RejectsMalformedArtifacts) {
  for (const char* bad : {"", "{}", "[", "[{]", "[{\"path\":1}]", "[{\"size\":\"1\"}]", "[{\"size\":1.5}]",
                          "[{\"size\":1e3}]", "[{\"size\":01}]", "[{\"size\":-}]", "[{\"size\":9223372036854775808}]",
                          "[{\"directory\":1}]", "[{\"directory\":tru}]", "[{\"owner\":\"x\"}]", "[{},]",
                          "[{\"path\":\"a\"}] x", "[\"a\"]"}) {
    auto r = DecodeArtifacts(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << bad;
    EXPECT_EQ(r.status().message().rfind("bad JSON at byte ", 0), 0u) << r.status().message();
  }
  EXPECT_NE(DecodeArtifacts("[{\"owner\":\"x\"}]").status().message().find("unknown key"), std::string::npos);
  EXPECT_EQ(DecodeArtifacts("[{\"size\":-9223372036854775808}]").value()[0].size,
            std::numeric_limits<int64_t>::min());
}

}  // namespace
}  // namespace grademl::store
