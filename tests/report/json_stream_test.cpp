// JsonStream against nlohmann's own dump(2): random values (nested objects and arrays, strings
// with every kind of byte that needs escaping, doubles of every magnitude, NaN, infinities,
// -0, integers at their limits) written through the streaming calls one by one must come out
// byte for byte as nlohmann writes the same value.
#include "report/json_stream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "core/text.h"

namespace grademl::report {
namespace {

using nlohmann::json;

// Writes `v` through the streaming calls (not Value), as WriteJsonReport does for large parts.
void Stream(const json& v, JsonStream& w) {
  switch (v.type()) {
    case json::value_t::object:
      w.BeginObject();
      for (const auto& [key, value] : v.items()) {
        w.Key(key);
        Stream(value, w);
      }
      w.EndObject();
      break;
    case json::value_t::array:
      w.BeginArray();
      for (const json& x : v) Stream(x, w);
      w.EndArray();
      break;
    case json::value_t::string: w.String(v.get_ref<const std::string&>()); break;
    case json::value_t::boolean: w.Bool(v.get<bool>()); break;
    case json::value_t::number_integer: w.Int(v.get<int64_t>()); break;
    case json::value_t::number_unsigned: w.UInt(v.get<uint64_t>()); break;
    case json::value_t::number_float: w.Double(v.get<double>()); break;
    default: w.Null(); break;
  }
}

std::string Streamed(const std::function<void(JsonStream&)>& write, int indent = 2) {
  std::string out;
  {
    JsonStream w([&](std::string_view chunk) { out.append(chunk); }, indent);
    write(w);
  }
  return out;
}

std::string RandomString(std::mt19937_64& rng) {
  static const std::vector<std::string> pieces = {
      "a", "Z", " ", "\"", "\\", "/", "\n", "\r", "\t", "\b", "\f", std::string(1, '\0'), "\x01", "\x1f",
      "\x7f", "é", "→", "\xF0\x9F\x98\x80", "\xC3", "\xFF", "key", "#"};
  std::string s;
  int n = static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) s += pieces[rng() % pieces.size()];
  return ValidUtf8(s);  // as the report makes every string
}

double RandomDouble(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return std::numeric_limits<double>::quiet_NaN();
    case 3: return (rng() % 2 ? 1 : -1) * std::numeric_limits<double>::infinity();
    case 4: return static_cast<double>(static_cast<int64_t>(rng() % 2000000) - 1000000);
    case 5: return std::ldexp(static_cast<double>(rng() % 1000003), static_cast<int>(rng() % 120) - 90);
    case 6: return std::numeric_limits<double>::denorm_min() * static_cast<double>(rng() % 100 + 1);
    case 7: return std::numeric_limits<double>::max() / static_cast<double>(rng() % 100 + 1);
    default: {
      uint64_t bits = rng();
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
  }
}

json RandomValue(std::mt19937_64& rng, int depth) {
  int kind = static_cast<int>(rng() % (depth > 3 ? 6 : 8));
  switch (kind) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: {
      static const int64_t edges[] = {0, -1, 1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
      return rng() % 3 == 0 ? edges[rng() % 5] : static_cast<int64_t>(rng());
    }
    case 3: return rng() % 2 ? json(static_cast<uint64_t>(rng())) : json(std::numeric_limits<uint64_t>::max());
    case 4: return RandomDouble(rng);
    case 5: return RandomString(rng);
    case 6: {
      json a = json::array();
      int n = static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      int n = static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i) o[RandomString(rng)] = RandomValue(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonStreamTest, RandomValuesComeOutAsNlohmannDumpsThem) {
  std::mt19937_64 rng(2611);
  for (int i = 0; i < 3000; ++i) {
    json v = RandomValue(rng, 0);
    ASSERT_EQ(Streamed([&](JsonStream& w) { Stream(v, w); }), v.dump(2)) << "value " << i;
    // A value handed over whole, inside streamed containers, at depth.
    json wrapped = {{"a", json::array({v, {{"b", v}}})}};
    ASSERT_EQ(Streamed([&](JsonStream& w) {
                w.BeginObject();
                w.Key("a");
                w.BeginArray();
                w.Value(v);
                w.BeginObject();
                w.Member("b", v);
                w.EndObject();
                w.EndArray();
                w.EndObject();
              }),
              wrapped.dump(2))
        << "value " << i;
  }
}

TEST(JsonStreamTest, EmptyContainersAndOtherIndents) {
  json v = {{"a", json::array()}, {"b", json::object()}, {"c", {json::array(), json::object(), 1}}};
  for (int indent : {0, 1, 2, 4}) {
    EXPECT_EQ(Streamed([&](JsonStream& w) { Stream(v, w); }, indent), v.dump(indent)) << indent;
  }
}

TEST(JsonStreamTest, LargeOutputReachesTheSinkInChunksAndInOrder) {
  std::vector<size_t> chunks;
  std::string out;
  {
    JsonStream w([&](std::string_view chunk) {
      chunks.push_back(chunk.size());
      out.append(chunk);
    });
    w.BeginArray();
    for (int i = 0; i < 300000; ++i) w.Int(i);
    w.EndArray();
  }
  json expect = json::array();
  for (int i = 0; i < 300000; ++i) expect.push_back(i);
  EXPECT_EQ(out, expect.dump(2));
  EXPECT_GT(chunks.size(), 1u);
  for (size_t c : chunks) EXPECT_LE(c, (size_t{1} << 20) + 4096);
}

TEST(JsonStreamTest, UntrustedTextIsMadeValidUtf8) {
  std::string bad = "a\xFF\xC3z\x1b";
  EXPECT_EQ(Streamed([&](JsonStream& w) { w.Text(bad); }), json(ValidUtf8(bad)).dump());
  EXPECT_EQ(Streamed([&](JsonStream& w) { w.Text("plain é"); }), "\"plain é\"");
}

}  // namespace
}  // namespace grademl::report
