// Tests of the streaming Chrome-trace reader (src/importers/chrome_json/json_event_reader)
// and of TraceInput (src/importers/trace_input): exact times, offsets, top-level fields in
// any position, chunk boundaries anywhere, compression, truncation and garbage. Expected
// values are written by hand from the fixtures (offsets are found in the fixture text with
// std::string::find), never taken from the reader's own output.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "importers/chrome_json/json_event_reader.h"
#include "importers/trace_input.h"
#include "importers/chunked_trace_input.h"
#include "skip_or_fail.h"

namespace grademl::importers::chrome_json {
namespace {

// An event copied out of the reader's views.
struct Ev {
  uint64_t offset = 0;
  char ph = 0;
  std::string name, cat, pid_str, tid_str, id, bp, s, bad_field;
  bool pid_is_int = false, tid_is_int = false, ts_float = false;
  int64_t pid = 0, tid = 0;
  std::optional<int64_t> ts, dur;
  std::vector<std::pair<std::string, ArgValue>> args;
  std::vector<std::string> arg_text;
};

struct Result {
  Status status;
  TraceHeader header;
  std::vector<Ev> events;
};

Result Read(TraceInput& input, const ReadOptions& options = {}) {
  Result r;
  auto header = ReadChromeTrace(
      input,
      [&](const RawTraceEvent& e) {
        Ev ev;
        ev.offset = e.offset;
        ev.ph = e.ph;
        ev.name = e.name;
        ev.cat = e.cat;
        ev.pid_str = e.pid_str;
        ev.tid_str = e.tid_str;
        ev.id = e.id;
        ev.bp = e.bp;
        ev.s = e.s;
        ev.bad_field = e.bad_field;
        ev.pid_is_int = e.pid_is_int;
        ev.tid_is_int = e.tid_is_int;
        ev.pid = e.pid;
        ev.tid = e.tid;
        ev.ts = e.ts_ns;
        ev.dur = e.dur_ns;
        ev.ts_float = e.ts_float;
        for (const auto& [k, v] : e.args) {
          ev.args.emplace_back(std::string(k), v);
          ev.arg_text.emplace_back(v.s);
        }
        r.events.push_back(std::move(ev));
        return Status::Ok();
      },
      options);
  if (header.ok()) {
    r.header = *header;
  } else {
    r.status = header.status();
  }
  return r;
}

Result ReadString(const std::string& text, size_t chunk = 1 << 20, const ReadOptions& options = {}) {
  testing::ChunkedTraceInput input(text, chunk);
  return Read(input, options);
}

// The Kineto shape: header fields before and after traceEvents, escapes and braces in strings.
const std::string kKineto = R"({
  "schemaVersion": 1,
  "deviceProperties": [ {"id": 0, "name": "GPU \"zero\"", "totalGlobalMem": 1}, {"id": 1, "name": "GPU one"} ],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8, "pg_config": [{"ranks": [0, 1]}]},
  "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "void gemm<{x}>\"[q]\\", "pid": 0, "tid": 7,
   "ts": 1712195495519689.047, "dur": 63.813,
   "args": {"device": 0, "stream": 7, "correlation": 123, "grid": [80, 1, 1], "est. occupancy %": 12.5,
            "External id": 9, "flag": true, "nothing": null, "label": "a\u00e9\n", "obj": {"k": [1, {"z": "}"}]}}},
  {"ph": "f", "id": 1, "pid": 1102, "tid": 1262, "ts": 1712195495519695.812, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1661203462584767},
  {"name": "async", "ph": "b", "id2": {"local": "0x1f"}, "pid": 5, "tid": 5, "ts": "12.5", "cat": "c"},
  {"name": "str ts", "ph": "X", "pid": 1, "tid": 1, "ts": "1500", "dur": 2}
  ],
  "traceName": "x.json", "logs": ["a", "{", "]"],
  "displayTimeUnit": "ns",
  "baseTimeNanoseconds": 1735632360000000000
}
)";

TEST(DecimalToInt64Test, ExactMicrosecondsToNanoseconds) {
  EXPECT_EQ(DecimalToInt64("1712195495519689.047", 3), 1712195495519689047);
  EXPECT_EQ(DecimalToInt64("246", 3), 246000);
  EXPECT_EQ(DecimalToInt64("63.813", 3), 63813);
  EXPECT_EQ(DecimalToInt64("0.5", 3), 500);
  EXPECT_EQ(DecimalToInt64("-12.25", 3), -12250);
  EXPECT_EQ(DecimalToInt64("1.5e3", 3), 1500000);
  EXPECT_EQ(DecimalToInt64("1E-3", 3), 1);
  EXPECT_EQ(DecimalToInt64("0.0004", 3), 0);      // 0.4 ns
  EXPECT_EQ(DecimalToInt64("0.0005", 3), 1);      // 0.5 ns: ties away from zero
  EXPECT_EQ(DecimalToInt64("-0.0005", 3), -1);
  EXPECT_EQ(DecimalToInt64("2.0014999", 3), 2001);
  EXPECT_EQ(DecimalToInt64("0001.000", 3), 1000);
  EXPECT_EQ(DecimalToInt64("1735632360000000000", 0), 1735632360000000000);
  EXPECT_EQ(DecimalToInt64("9223372036854775.807", 3), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(DecimalToInt64("-9223372036854775.808", 3), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(DecimalToInt64("9223372036854775.808", 3), std::nullopt);
  EXPECT_EQ(DecimalToInt64("1e30", 3), std::nullopt);
  EXPECT_EQ(DecimalToInt64("1e-30", 3), 0);
  EXPECT_EQ(DecimalToInt64("", 3), std::nullopt);
  EXPECT_EQ(DecimalToInt64("-", 3), std::nullopt);
  EXPECT_EQ(DecimalToInt64("abc", 3), std::nullopt);
  EXPECT_EQ(DecimalToInt64("12abc", 3), std::nullopt);
  EXPECT_EQ(DecimalToInt64("1e", 3), std::nullopt);
  // Around int64's edges (16-digit epoch µs, 19-digit ns).
  EXPECT_EQ(DecimalToInt64("1695835542481129", 3), 1695835542481129000);
  EXPECT_EQ(DecimalToInt64("9223372036854775807", 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(DecimalToInt64("9223372036854775808", 0), std::nullopt);
  EXPECT_EQ(DecimalToInt64("-9223372036854775808", 0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(DecimalToInt64("-9223372036854775809", 0), std::nullopt);
  EXPECT_EQ(DecimalToInt64("18446744073709551616", 0), std::nullopt);
  EXPECT_EQ(DecimalToInt64("9999999999999999999", 3), std::nullopt);
  EXPECT_EQ(DecimalToInt64("9223372036854775.807", 3), std::numeric_limits<int64_t>::max());
  // 40+ significant digits: exact up to what matters.
  EXPECT_EQ(DecimalToInt64("1.00000000000000000000000000000000000000000000009", 3), 1000);
}

TEST(JsonEventReaderTest, KinetoShapeEventsAndHeader) {
  Result r = ReadString(kKineto);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.events.size(), 5u);
  const Ev& k = r.events[0];
  EXPECT_EQ(k.offset, kKineto.find("{\"ph\": \"X\", \"cat\": \"kernel\""));
  EXPECT_EQ(k.ph, 'X');
  EXPECT_EQ(k.cat, "kernel");
  EXPECT_EQ(k.name, "void gemm<{x}>\"[q]\\");
  EXPECT_TRUE(k.pid_is_int);
  EXPECT_EQ(k.pid, 0);
  EXPECT_EQ(k.tid, 7);
  EXPECT_EQ(k.ts, 1712195495519689047);
  EXPECT_EQ(k.dur, 63813);
  EXPECT_TRUE(k.ts_float);
  ASSERT_EQ(k.args.size(), 10u);
  EXPECT_EQ(k.args[0].first, "device");
  EXPECT_EQ(k.args[0].second.kind, ArgValue::kInt);
  EXPECT_EQ(k.args[1].second.i, 7);
  EXPECT_EQ(k.args[2].second.i, 123);
  EXPECT_EQ(k.args[3].second.kind, ArgValue::kOther);
  EXPECT_EQ(k.arg_text[3], "[80, 1, 1]");
  EXPECT_EQ(k.args[4].first, "est. occupancy %");
  EXPECT_EQ(k.args[4].second.kind, ArgValue::kDouble);
  EXPECT_DOUBLE_EQ(k.args[4].second.d, 12.5);
  EXPECT_EQ(k.args[5].first, "External id");
  EXPECT_EQ(k.args[6].second.kind, ArgValue::kBool);
  EXPECT_EQ(k.args[6].second.i, 1);
  EXPECT_EQ(k.args[7].second.kind, ArgValue::kNull);
  EXPECT_EQ(k.args[8].second.kind, ArgValue::kString);
  EXPECT_EQ(k.arg_text[8], "a\xc3\xa9\n");
  EXPECT_EQ(k.args[9].second.kind, ArgValue::kOther);
  EXPECT_EQ(k.arg_text[9], R"({"k": [1, {"z": "}"}]})");

  const Ev& f = r.events[1];
  EXPECT_EQ(f.ph, 'f');
  EXPECT_EQ(f.id, "1");
  EXPECT_EQ(f.bp, "e");
  EXPECT_EQ(f.ts, 1712195495519695812);
  EXPECT_FALSE(f.dur.has_value());

  const Ev& i = r.events[2];
  EXPECT_EQ(i.ph, 'i');
  EXPECT_EQ(i.s, "g");
  EXPECT_FALSE(i.pid_is_int);
  EXPECT_EQ(i.pid_str, "Traces");
  EXPECT_EQ(i.tid_str, "Trace PyTorch Profiler");
  EXPECT_EQ(i.ts, 1661203462584767000);
  EXPECT_FALSE(i.ts_float);

  const Ev& b = r.events[3];
  EXPECT_EQ(b.id, "0x1f");
  EXPECT_EQ(b.ts, 12500);
  EXPECT_TRUE(b.ts_float);  // a string with a '.'
  EXPECT_EQ(r.events[4].ts, 1500000);
  EXPECT_FALSE(r.events[4].ts_float);
  EXPECT_EQ(r.events[4].offset, kKineto.find("{\"name\": \"str ts\""));

  const TraceHeader& h = r.header;
  EXPECT_FALSE(h.bare_array);
  EXPECT_EQ(h.schema_version, 1);
  EXPECT_EQ(h.rank, 3);
  EXPECT_EQ(h.world_size, 8);
  EXPECT_EQ(h.backend, "nccl");
  EXPECT_EQ(h.device_names, (std::vector<std::string>{"GPU \"zero\"", "GPU one"}));
  EXPECT_EQ(h.display_time_unit, "ns");
  EXPECT_FALSE(h.ts_unit_ns);  // after traceEvents: Kineto's "ns" with ts in µs
  EXPECT_EQ(h.base_time_ns, 1735632360000000000);
  EXPECT_EQ(h.events, 5);
  EXPECT_EQ(h.bytes, kKineto.size());
}

TEST(JsonEventReaderTest, EveryChunkSizeGivesTheSameEvents) {
  Result whole = ReadString(kKineto);
  ASSERT_TRUE(whole.status.ok());
  for (size_t chunk : {1, 2, 3, 7, 63, 64, 65, 100, 257}) {
    Result r = ReadString(kKineto, chunk);
    ASSERT_TRUE(r.status.ok()) << chunk << ": " << r.status.message();
    ASSERT_EQ(r.events.size(), whole.events.size()) << chunk;
    for (size_t i = 0; i < r.events.size(); ++i) {
      EXPECT_EQ(r.events[i].offset, whole.events[i].offset) << chunk;
      EXPECT_EQ(r.events[i].name, whole.events[i].name) << chunk;
      EXPECT_EQ(r.events[i].ts, whole.events[i].ts) << chunk;
      EXPECT_EQ(r.events[i].arg_text, whole.events[i].arg_text) << chunk;
    }
    EXPECT_EQ(r.header.base_time_ns, whole.header.base_time_ns);
    EXPECT_EQ(r.header.device_names, whole.header.device_names);
  }
}

TEST(JsonEventReaderTest, BareArrayTorch113Shape) {
  const std::string text =
      "\xEF\xBB\xBF[{\"name\": \"aten::zeros\", \"ph\": \"X\", \"ts\": 246, \"dur\": 128, \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}},\n"
      " {\"name\": \"aten::empty\", \"ph\": \"X\", \"ts\": 299, \"dur\": 2, \"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}]";
  Result r = ReadString(text, 5);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.header.bare_array);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].offset, 4u);  // after the 3-byte BOM and '['
  EXPECT_EQ(r.events[1].offset, text.find("{\"name\": \"aten::empty\""));
  EXPECT_EQ(r.events[0].pid_str, "CPU functions");
  EXPECT_TRUE(r.events[0].tid_is_int);
  EXPECT_EQ(r.events[0].ts, 246000);
  EXPECT_EQ(r.events[0].dur, 128000);
  EXPECT_EQ(r.events[1].ts, 299000);
}

TEST(JsonEventReaderTest, BareArrayMayEndWithoutBracket) {
  // The Chrome format allows it: a trace written by a process that died.
  Result r = ReadString("[{\"ph\":\"i\",\"ts\":1},\n{\"ph\":\"i\",\"ts\":2},\n");
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.events.size(), 2u);
}

TEST(JsonEventReaderTest, DisplayTimeUnitNsBeforeEventsMeansNanoseconds) {
  Result r = ReadString(R"({"displayTimeUnit": "ns", "traceEvents": [{"ph": "X", "ts": 1500, "dur": 2.4}]})");
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.header.ts_unit_ns);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].ts, 1500);
  EXPECT_EQ(r.events[0].dur, 2);
}

TEST(JsonEventReaderTest, BadFieldsAreNamedNotFatal) {
  Result r = ReadString(R"([{"ph": "X", "ts": "soon", "pid": {"a": 1}, "name": "n"}, {"ph": 5, "ts": 1e400}, {"ts": 1, "args": [1]}])");
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[0].bad_field, "ts");
  EXPECT_FALSE(r.events[0].ts.has_value());
  EXPECT_EQ(r.events[0].name, "n");
  EXPECT_EQ(r.events[1].bad_field, "ph");
  EXPECT_EQ(r.events[1].ph, 0);
  EXPECT_EQ(r.events[2].bad_field, "args");
  EXPECT_EQ(r.events[2].ts, 1000);
}

// Bytes that are not UTF-8 and lone surrogate escapes, in every string the reader hands out
// (names, categories, args keys and values, pid/tid strings, ids, id2 keys) and in the header
// values it keeps: each such character becomes U+FFFD (EF BF BD), the rest of the string is
// kept, and every later event is still delivered, at its own offset. Before, one such byte
// ended the reading (simdjson refuses the whole event) and a lone surrogate emptied the
// string (or, in a key, ended the reading).
const std::string kHostileText =
    "{\"deviceProperties\": [{\"name\": \"GPU\\ud800\xff" "0\"}, {\"name\": \"ok\"}],\n"
    " \"distributedInfo\": {\"back\\udc00end\": \"x\", \"backend\": \"nc\xfe" "cl\", \"rank\": 2},\n"
    " \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"name\": \"a\xff" "b\", \"cat\": \"c\xc0\xaf\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1,"
    " \"args\": {\"k\xff\": \"v\xed\xa0\x80\", \"n\": 7}},\n"
    "{\"ph\": \"X\", \"name\": \"ab\\ud800cd\", \"cat\": \"x\\udc00\", \"pid\": \"p\\ud800\", \"tid\": \"t\\uDBFF\","
    " \"ts\": 2, \"dur\": 1, \"args\": {\"k\\ud800\": \"v\\udfff\", \"pair\": \"\\ud83d\\ude00\"}},\n"
    "{\"ph\": \"s\", \"id\": \"i\\ud800\", \"cat\": \"flow\", \"name\": \"f\", \"pid\": 1, \"tid\": 1, \"ts\": 3},\n"
    "{\"ph\": \"b\", \"id2\": {\"loc\\ud800al\": \"x\", \"local\": \"l\xff\"}, \"name\": \"a\", \"cat\": \"c\", \"pid\": 1,"
    " \"tid\": 1, \"ts\": 4, \"bp\": \"e\\ud800\", \"s\": \"\xff\"},\n"
    "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"proc\\ud800\\u0041\xff\"}},\n"
    "{\"ph\": \"X\", \"name\": \"after\", \"pid\": 1, \"tid\": 1, \"ts\": 5, \"dur\": 1}\n"
    "]}\n";

TEST(JsonEventReaderTest, InvalidUtf8AndLoneSurrogatesAreReplacedAndNothingAfterIsLost) {
  const std::string fffd = "\xEF\xBF\xBD";
  for (size_t chunk : {size_t{1} << 20, size_t{1}, size_t{7}, size_t{64}}) {
    Result r = ReadString(kHostileText, chunk);
    ASSERT_TRUE(r.status.ok()) << chunk << ": " << r.status.message();
    ASSERT_EQ(r.events.size(), 6u) << chunk;
    // Each event at the offset of its own '{' (the first after "traceEvents" and each newline).
    size_t at = kHostileText.find('{', kHostileText.find("\"traceEvents\""));
    for (const Ev& e : r.events) {
      EXPECT_EQ(e.offset, at) << chunk;
      EXPECT_EQ(e.bad_field, "") << chunk << " at " << at;
      at = kHostileText.find("\n{", at) + 1;
    }
    const Ev& a = r.events[0];
    EXPECT_EQ(a.name, "a" + fffd + "b");
    EXPECT_EQ(a.cat, "c" + fffd + fffd);  // an overlong '/': both bytes
    ASSERT_EQ(a.args.size(), 2u);
    EXPECT_EQ(a.args[0].first, "k" + fffd);
    EXPECT_EQ(a.args[0].second.kind, ArgValue::kString);
    EXPECT_EQ(a.arg_text[0], "v" + fffd + fffd + fffd);  // an encoded surrogate: its three bytes
    EXPECT_EQ(a.args[1].first, "n");
    EXPECT_EQ(a.args[1].second.i, 7);
    EXPECT_EQ(a.ts, 1000);

    const Ev& b = r.events[1];
    EXPECT_EQ(b.name, "ab" + fffd + "cd");
    EXPECT_EQ(b.cat, "x" + fffd);
    EXPECT_FALSE(b.pid_is_int);
    EXPECT_EQ(b.pid_str, "p" + fffd);
    EXPECT_EQ(b.tid_str, "t" + fffd);
    ASSERT_EQ(b.args.size(), 2u);
    EXPECT_EQ(b.args[0].first, "k" + fffd);
    EXPECT_EQ(b.arg_text[0], "v" + fffd);
    EXPECT_EQ(b.args[1].first, "pair");
    EXPECT_EQ(b.arg_text[1], "\xF0\x9F\x98\x80");  // a surrogate pair is a character, not repaired
    EXPECT_EQ(b.ts, 2000);

    EXPECT_EQ(r.events[2].id, "i" + fffd);
    EXPECT_EQ(r.events[2].ph, 's');
    // id2: the key "loc\ud800al" is not "local"; the value of "local" is repaired.
    EXPECT_EQ(r.events[3].id, "l" + fffd);
    EXPECT_EQ(r.events[3].bp, "e" + fffd);
    EXPECT_EQ(r.events[3].s, fffd);
    // \ud800\u0041: the lone surrogate only; the 'A' after it is kept.
    ASSERT_EQ(r.events[4].arg_text.size(), 1u);
    EXPECT_EQ(r.events[4].arg_text[0], "proc" + fffd + "A" + fffd);
    EXPECT_EQ(r.events[5].name, "after");
    EXPECT_EQ(r.events[5].ts, 5000);

    EXPECT_EQ(r.header.device_names, (std::vector<std::string>{"GPU" + fffd + fffd + "0", "ok"}));
    EXPECT_EQ(r.header.backend, "nc" + fffd + "cl");
    EXPECT_EQ(r.header.rank, 2);
    EXPECT_EQ(r.header.events, 6);
  }
}

TEST(JsonEventReaderTest, RepairedEventsThatAreDamagedOtherwiseStayDamaged) {
  // An invalid escape (\q) is not repaired: the name is a bad field, as before, even when the
  // event also had a lone surrogate that was.
  Result r = ReadString("[{\"ph\": \"X\", \"name\": \"\\q\\ud800\", \"cat\": \"c\\ud800\", \"ts\": 1}, {\"ts\": 2}]");
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].bad_field, "name");
  EXPECT_EQ(r.events[0].cat, "c\xEF\xBF\xBD");
  // A byte that is not UTF-8 outside any string is invalid JSON: one line at the event's
  // offset, everything before it delivered.
  std::string text = "[{\"ts\": 1}, {\"ts\": 2, \xff \"name\": \"x\"}, {\"ts\": 3}]";
  r = ReadString(text);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.events.size(), 1u);
  const std::string& m = r.status.message();
  EXPECT_EQ(m.rfind("chunked.json: byte 12: invalid JSON in an event", 0), 0u) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

// Every prefix of the trace: the events whose closing brace is inside it are delivered,
// then an error naming the file and a byte offset (or success for the whole text).
TEST(JsonEventReaderTest, TruncatedAnywhereDeliversEverythingBeforeTheDamage) {
  Result whole = ReadString(kKineto);
  ASSERT_TRUE(whole.status.ok());
  // Where each event ends, found in the text by hand-made markers.
  std::vector<size_t> ends;
  for (size_t i = 0; i < whole.events.size(); ++i) {
    size_t next = i + 1 < whole.events.size() ? whole.events[i + 1].offset : kKineto.find("\n  ],");
    ends.push_back(kKineto.rfind('}', next) + 1);
  }
  for (size_t cut = 0; cut < kKineto.size() - 2; ++cut) {  // the last 2 bytes are "}\n"
    Result r = ReadString(kKineto.substr(0, cut), 16);
    ASSERT_FALSE(r.status.ok()) << "cut at " << cut;
    const std::string& m = r.status.message();
    EXPECT_EQ(m.rfind("chunked.json: byte ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    size_t expected = 0;
    for (size_t e : ends) expected += e <= cut ? 1 : 0;
    EXPECT_EQ(r.events.size(), expected) << "cut at " << cut << ": " << m;
  }
}

TEST(JsonEventReaderTest, TruncatedEventNamesItsOffset) {
  std::string text = kKineto.substr(0, kKineto.find("\"name\": \"async\"") + 10);
  Result r = ReadString(text);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.events.size(), 3u);
  size_t open = kKineto.rfind('{', kKineto.find("\"name\": \"async\""));
  EXPECT_EQ(r.status.message(),
            "chunked.json: byte " + std::to_string(open) + ": truncated: the input ends inside this event (at byte " +
                std::to_string(text.size()) + ")");
}

TEST(JsonEventReaderTest, StructuralErrors) {
  struct Case {
    std::string text;
    std::string message;
    size_t events;
  };
  std::vector<Case> cases = {
      {"", "chunked.json: byte 0: empty file, not a Chrome trace", 0},
      {"  \n", "chunked.json: byte 3: empty file, not a Chrome trace", 0},
      {"hello", "chunked.json: byte 0: not a Chrome trace (expected '{' or '[', found 'h')", 0},
      {"{\"a\": 1}", "chunked.json: byte 7: no traceEvents array in the top-level object", 0},
      {"{\"traceEvents\": 5}", "chunked.json: byte 16: traceEvents is not an array", 0},
      {"[{\"ts\":1}, 5]", "chunked.json: byte 11: expected an event object in traceEvents, found '5'", 1},
      {"[{\"ts\":1} {\"ts\":2}]", "chunked.json: byte 10: expected ',' between events", 1},
      {"[{\"ts\":1}, [1]]", "chunked.json: byte 11: expected an event object in traceEvents, found '['", 1},
      {"[ , {\"ts\":1}]", "chunked.json: byte 2: expected an event object in traceEvents, found ','", 0},
      {"[{\"ts\":1}] x", "chunked.json: byte 11: unexpected 'x' after the end of the trace", 1},
      {"[{\"ts\":1}, {\"ts\" 2}]", "chunked.json: byte 11: invalid JSON in an event", 1},
      {"{\"traceEvents\": [{\"ts\": 1}]", "chunked.json: byte 27: truncated: the input ends inside the top-level object", 1},
  };
  for (const Case& c : cases) {
    Result r = ReadString(c.text);
    ASSERT_FALSE(r.status.ok()) << c.text;
    EXPECT_EQ(r.status.message().substr(0, c.message.size()), c.message) << c.text;
    EXPECT_EQ(r.events.size(), c.events) << c.text;
  }
}

TEST(JsonEventReaderTest, EventLargerThanTheLimitIsAnError) {
  std::string big = "[{\"ts\": 1}, {\"name\": \"" + std::string(5000, 'a') + "\"}]";
  ReadOptions options;
  options.max_event_bytes = 1000;
  Result r = ReadString(big, 256, options);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.message(), "chunked.json: byte 12: event larger than 1000 bytes");
  EXPECT_EQ(r.events.size(), 1u);
}

TEST(JsonEventReaderTest, CallbackErrorStopsReading) {
  testing::ChunkedTraceInput input(kKineto, 4096);
  int seen = 0;
  auto header = ReadChromeTrace(input, [&](const RawTraceEvent&) {
    return ++seen == 2 ? InvalidArgument("enough") : Status::Ok();
  });
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().message(), "enough");
  EXPECT_EQ(seen, 2);
}

TEST(JsonEventReaderTest, RandomBytesGiveOneLineErrors) {
  std::mt19937_64 rng(13);
  for (int round = 0; round < 300; ++round) {
    std::string text(static_cast<size_t>(rng() % 2000), '\0');
    for (char& c : text) c = static_cast<char>(rng());
    // Half of them start like a trace, to get past the first byte.
    if (round % 2 == 0) text = (round % 4 == 0 ? "[{" : "{\"traceEvents\": [{") + text;
    Result r = ReadString(text, 1 + rng() % 300);
    if (r.status.ok()) continue;
    const std::string& m = r.status.message();
    EXPECT_FALSE(m.empty());
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.rfind("chunked.json: byte ", 0), 0u) << m;
  }
}

TEST(LooksLikeChromeTraceTest, Sniffing) {
  EXPECT_TRUE(LooksLikeChromeTrace("[{\"name\": \"x\"}"));
  EXPECT_TRUE(LooksLikeChromeTrace("\xEF\xBB\xBF  [ \n{"));
  EXPECT_TRUE(LooksLikeChromeTrace("[]"));
  EXPECT_TRUE(LooksLikeChromeTrace("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": ["));
  EXPECT_TRUE(LooksLikeChromeTrace("{\"foo\": 1, \"traceEvents\": ["));
  EXPECT_TRUE(LooksLikeChromeTrace("{\"displayTimeUnit\": \"ms\""));
  EXPECT_FALSE(LooksLikeChromeTrace("{\"Event\":\"SparkListenerLogStart\",\"Spark Version\":\"3.5.0\"}"));
  EXPECT_FALSE(LooksLikeChromeTrace("[1, 2]"));
  EXPECT_FALSE(LooksLikeChromeTrace("name,ts\n"));
  EXPECT_FALSE(LooksLikeChromeTrace(""));
  EXPECT_FALSE(LooksLikeChromeTrace("\x1f\x8b\x08"));
}

// ---- The fixtures in tests/data/chrome_traces (also the fuzzer's seeds) ------------------

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(GRADEML_TESTDATA_DIR) + "/chrome_traces/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(JsonEventReaderFixtureTest, ChromeMisc) {
  std::string text = Fixture("chrome_misc.json");
  ASSERT_FALSE(text.empty());
  Result r = ReadString(text, 5);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.events.size(), 6u);
  EXPECT_EQ(r.events[0].name, "a\xc3\xa9\\\"}{[");
  EXPECT_EQ(r.events[0].cat, "c,d");
  EXPECT_EQ(r.events[0].ts, 12500);
  EXPECT_EQ(r.events[0].dur, 12500);  // "1.25e1" µs
  EXPECT_TRUE(r.events[0].ts_float);
  EXPECT_EQ(r.events[1].ph, 't');
  EXPECT_EQ(r.events[1].id, "9");
  const Ev& c = r.events[2];
  EXPECT_EQ(c.ph, 'C');
  ASSERT_EQ(c.args.size(), 7u);
  EXPECT_EQ(c.args[0].second.kind, ArgValue::kInt);
  EXPECT_EQ(c.args[1].second.kind, ArgValue::kDouble);
  EXPECT_DOUBLE_EQ(c.args[1].second.d, -2.5);
  EXPECT_EQ(c.arg_text[1], "-2.5");
  EXPECT_EQ(c.args[2].second.kind, ArgValue::kString);
  EXPECT_EQ(c.args[3].second.kind, ArgValue::kBool);
  EXPECT_EQ(c.args[4].second.kind, ArgValue::kNull);
  EXPECT_EQ(c.args[5].second.kind, ArgValue::kOther);
  EXPECT_EQ(c.arg_text[5], "{\"g\": [1]}");
  EXPECT_EQ(c.args[6].second.kind, ArgValue::kOther);
  EXPECT_EQ(c.arg_text[6], "18446744073709551615");
  EXPECT_EQ(r.events[3].ts, -3000);
  EXPECT_EQ(r.events[3].ph, 'I');
  EXPECT_EQ(r.events[3].s, "p");
  EXPECT_FALSE(r.events[4].ts.has_value());
  EXPECT_EQ(r.events[4].bad_field, "");
  EXPECT_FALSE(r.events[5].pid_is_int);
  EXPECT_EQ(r.events[5].pid_str, "1.5");
  EXPECT_EQ(r.events[5].tid_str, "99999999999999999999");
  EXPECT_EQ(r.header.display_time_unit, "ns");
  EXPECT_FALSE(r.header.ts_unit_ns);
}

TEST(JsonEventReaderFixtureTest, KinetoSmall) {
  std::string text = Fixture("kineto_small.json");
  Result r = ReadString(text, 7);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.events.size(), 18u);
  const Ev& kernel = r.events[4];
  EXPECT_EQ(kernel.cat, "kernel");
  EXPECT_EQ(kernel.name, "void gemm_kernel<float, 128>(float const*, \"x\")");
  EXPECT_EQ(kernel.ts, 1700000000000300500);
  EXPECT_EQ(kernel.dur, 120250);
  EXPECT_EQ(kernel.offset, text.find("{\n    \"ph\": \"X\", \"cat\": \"kernel\""));
  EXPECT_EQ(r.events[6].dur, 4500);
  EXPECT_EQ(r.events[3].ph, 's');
  EXPECT_EQ(r.events[3].id, "55");
  EXPECT_EQ(r.events[5].bp, "e");
  EXPECT_EQ(r.events[12].id, "0xa");
  EXPECT_EQ(r.events[16].pid_str, "Traces");
  EXPECT_EQ(r.events[17].pid_str, "");
  EXPECT_FALSE(r.events[17].pid_is_int);
  EXPECT_EQ(r.header.rank, 1);
  EXPECT_EQ(r.header.world_size, 2);
  EXPECT_EQ(r.header.backend, "nccl");
  EXPECT_EQ(r.header.device_names, std::vector<std::string>{"Fixture GPU A"});
  EXPECT_EQ(r.header.display_time_unit, "ms");
  EXPECT_EQ(r.header.base_time_ns, 1690000000000000000);
  EXPECT_EQ(r.header.schema_version, 1);
}

// ---- TraceInput: compression by magic bytes -------------------------------------------

std::string Gzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Zstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string ReadAll(TraceInput& input, Status* status) {
  std::string out;
  for (;;) {
    auto chunk = input.Next();
    if (!chunk.ok()) {
      *status = chunk.status();
      return out;
    }
    if (chunk->empty()) return out;
    out.append(chunk->data(), chunk->size());
  }
}

TEST(TraceInputTest, DetectsCompressionByMagic) {
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "{\"ph\": \"X\", \"ts\": " + std::to_string(i) + "},\n";
  struct Case {
    std::string bytes;
    std::string compression;
  };
  std::string gz = Gzip(big);
  for (const Case& c : {Case{big, "none"}, Case{gz, "gzip"}, Case{Zstd(big), "zstd"},
                        Case{gz + Gzip("tail"), "gzip"}}) {
    auto input = TraceInput::FromMemory(c.bytes, "mem");
    ASSERT_TRUE(input.ok());
    EXPECT_EQ((*input)->compression(), c.compression);
    Status status;
    std::string out = ReadAll(**input, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(out.substr(0, big.size()), big);
    EXPECT_EQ((*input)->offset(), out.size());
  }
}

TEST(JsonEventReaderFixtureTest, CompressedFixturesGiveTheSameEvents) {
  for (const char* name : {"kineto_small.json", "torch113_small.json", "chrome_misc.json"}) {
    std::string text = Fixture(name);
    Result plain = ReadString(text);
    ASSERT_TRUE(plain.status.ok()) << name;
    for (const std::string& packed : {Gzip(text), Zstd(text)}) {
      auto input = TraceInput::FromMemory(packed, name);
      ASSERT_TRUE(input.ok());
      Result r = Read(**input);
      ASSERT_TRUE(r.status.ok()) << name << ": " << r.status.message();
      ASSERT_EQ(r.events.size(), plain.events.size()) << name;
      for (size_t i = 0; i < r.events.size(); ++i) {
        EXPECT_EQ(r.events[i].offset, plain.events[i].offset);
        EXPECT_EQ(r.events[i].name, plain.events[i].name);
        EXPECT_EQ(r.events[i].ts, plain.events[i].ts);
      }
    }
  }
}

// Highly compressible data: the last compressed bytes expand to many output chunks, which the
// decoder hands out after the input has ended.
TEST(TraceInputTest, OutputPendingAtTheEndOfTheInput) {
  std::string big(5u << 20, 'x');
  big += "end";
  for (const std::string& packed : {Gzip(big), Zstd(big), Gzip(big) + Gzip(big)}) {
    auto input = TraceInput::FromMemory(packed, "mem");
    ASSERT_TRUE(input.ok());
    Status status;
    std::string out = ReadAll(**input, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(out.size() % big.size(), 0u);
    EXPECT_EQ(out.substr(out.size() - big.size()), big);
    // And cut short: an error, never a silent end.
    auto cut = TraceInput::FromMemory(std::string_view(packed).substr(0, packed.size() - 4), "mem");
    ASSERT_TRUE(cut.ok());
    Status cut_status;
    ReadAll(**cut, &cut_status);
    EXPECT_FALSE(cut_status.ok());
  }
}

TEST(TraceInputTest, TruncatedCompressedStreamsAreErrors) {
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "{\"ph\": \"X\", \"ts\": " + std::to_string(i * 7919 % 100003) + "},\n";
  for (std::string compressed : {Gzip(big), Zstd(big)}) {
    std::string cut = compressed.substr(0, compressed.size() / 2);
    auto input = TraceInput::FromMemory(cut, "cut.json.gz");
    ASSERT_TRUE(input.ok());
    Status status;
    std::string out = ReadAll(**input, &status);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.message(), "cut.json.gz: byte " + std::to_string(out.size()) + ": truncated " +
                                    std::string((*input)->compression()) + " data");
    EXPECT_EQ(big.substr(0, out.size()), out);  // what came out was right
  }
}

TEST(TraceInputTest, CorruptGzipIsAnError) {
  std::string gz = Gzip(std::string(100000, 'x') + "y");
  for (size_t i = 20; i < gz.size() - 8; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  auto input = TraceInput::FromMemory(gz, "bad.gz");
  ASSERT_TRUE(input.ok());
  Status status;
  ReadAll(**input, &status);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message().rfind("bad.gz: byte ", 0), 0u) << status.message();
}

TEST(TraceInputTest, MissingFile) {
  auto input = TraceInput::Open("/nonexistent/trace.json");
  ASSERT_FALSE(input.ok());
  EXPECT_EQ(input.status().message(), "/nonexistent/trace.json: no such file");
}

TEST(JsonEventReaderTest, GzipTraceFromFile) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("grademl_reader_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "t.json.gz").string();
  {
    std::ofstream(path, std::ios::binary) << Gzip(kKineto);
  }
  auto input = TraceInput::Open(path);
  ASSERT_TRUE(input.ok());
  Result r = Read(**input);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.events.size(), 5u);
  EXPECT_EQ(r.events[0].offset, kKineto.find("{\"ph\": \"X\", \"cat\": \"kernel\""));
}

// ---- The shared Kineto traces (../shared/traces/kineto), against nlohmann-json ----------

TEST(JsonEventReaderSharedTest, EveryKinetoTraceMatchesAnIndependentParser) {
  REQUIRE_SHARED_TRACES(dir, "kineto");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gz") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    auto input = TraceInput::Open(entry.path().string());
    ASSERT_TRUE(input.ok());
    EXPECT_EQ((*input)->compression(), "gzip");
    Result r = Read(**input);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    // The same file through zlib and nlohmann-json.
    gzFile gz = gzopen(entry.path().c_str(), "rb");
    ASSERT_NE(gz, nullptr);
    std::string text;
    char buf[1 << 16];
    int n;
    while ((n = gzread(gz, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    gzclose(gz);
    EXPECT_EQ(r.header.bytes, text.size());
    // nlohmann-json needs seconds (minutes under a sanitizer) for the 33 MB ones: the
    // field-by-field comparison is done on the files up to 16 MB.
    if (text.size() > (16u << 20)) {
      EXPECT_GT(r.events.size(), 100000u);
      continue;
    }
    nlohmann::json doc = nlohmann::json::parse(text);
    const nlohmann::json& events = doc.is_array() ? doc : doc["traceEvents"];
    ASSERT_EQ(r.events.size(), events.size());
    for (size_t i = 0; i < events.size(); ++i) {
      const nlohmann::json& e = events[i];
      const Ev& ev = r.events[i];
      ASSERT_EQ(text[ev.offset], '{');
      EXPECT_EQ(ev.name, e.value("name", std::string())) << i;
      if (e.contains("ph")) {
        EXPECT_EQ(std::string(1, ev.ph), e["ph"].get<std::string>()) << i;
      }
      if (e.contains("pid") && e["pid"].is_number_integer()) {
        EXPECT_EQ(ev.pid, e["pid"].get<int64_t>()) << i;
      }
      if (e.contains("pid") && e["pid"].is_string()) {
        EXPECT_EQ(ev.pid_str, e["pid"].get<std::string>()) << i;
      }
      if (e.contains("ts") && e["ts"].is_number_integer()) {
        EXPECT_EQ(ev.ts, e["ts"].get<int64_t>() * 1000) << i;
      }
      if (e.contains("ts") && e["ts"].is_number_float()) {
        // A double holds epoch µs only to 0.25 µs (hta-definitions.md), so the exact value
        // is taken from the text by string arithmetic: µs digits, then 3 decimals padded.
        ASSERT_TRUE(ev.ts.has_value());
        EXPECT_NEAR(static_cast<double>(*ev.ts) / 1000.0, e["ts"].get<double>(), 0.5) << i;
        EXPECT_TRUE(ev.ts_float);
        size_t k = text.find("\"ts\":", ev.offset) + 5;
        while (text[k] == ' ') ++k;
        size_t end = text.find_first_of(",}\n ", k);
        std::string token = text.substr(k, end - k);
        size_t dot = token.find('.');
        if (dot != std::string::npos && token.size() - dot - 1 <= 3) {
          std::string frac = token.substr(dot + 1);
          frac.resize(3, '0');
          EXPECT_EQ(*ev.ts, std::stoll(token.substr(0, dot)) * 1000 + std::stoll(frac)) << i << " " << token;
        }
      }
      if (e.contains("args")) {
        EXPECT_EQ(ev.args.size(), e["args"].size()) << i;
      }
    }
    std::string name = entry.path().filename().string();
    if (name == "cpu_only_rank34.json.gz") {
      EXPECT_EQ(r.header.rank, 34);
      EXPECT_EQ(r.header.world_size, 300);
      EXPECT_EQ(r.header.backend, "gloo");
      EXPECT_EQ(r.header.base_time_ns, 1719853884000000000);
    }
    if (name == "gpu_ns_resolution_rank0.json.gz") {
      EXPECT_EQ(r.header.display_time_unit, "ns");
      EXPECT_FALSE(r.header.ts_unit_ns);
      EXPECT_EQ(r.header.device_names.at(0), "Tesla V100-SXM2-32GB");
    }
    if (name == "cpu_torch113_mlp_digits.json.gz") {
      EXPECT_TRUE(r.header.bare_array);
    }
  }
  EXPECT_GE(files, 9);
}

}  // namespace
}  // namespace grademl::importers::chrome_json
