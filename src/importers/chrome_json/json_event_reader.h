// The streaming reader of Chrome Trace Event JSON (the PyTorch/Kineto family included).
//
// It reads a TraceInput (any size, compressed or not) and hands each event of `traceEvents`
// to a callback as a RawTraceEvent, in file order, with the byte offset of its '{'. The
// trace is either a bare array of events or an object with `traceEvents` anywhere among its
// keys; the top-level fields (schemaVersion, displayTimeUnit, baseTimeNanoseconds,
// distributedInfo, deviceProperties) are read wherever they are, before or after the events.
// Memory is bounded by the largest event (ReadOptions::max_event_bytes), not by the file:
// a structural scan finds each event's extent in a sliding window and simdjson (ondemand)
// parses that event alone. Bad input (truncated, corrupt, random bytes) ends the reading
// with one line "PATH: byte N: what" after every event before the damage was delivered.
// Bytes that are not UTF-8 and lone surrogate escapes in strings are not damage: an event
// (or header value) simdjson refuses for them is read again repaired (importers/json_text.h),
// each such character delivered as U+FFFD; valid events are parsed once, as before.
//
// Times: `ts` and `dur` are microseconds in the Chrome format (integer, float or string);
// they are converted to ns exactly from their decimal text (no double on the way), rounded
// to the nearest ns (ties away from zero) when written with more than 3 decimals.
// displayTimeUnit is a display setting in the format's spec and Kineto writes "ns" there
// (after the events) with ts still in µs; only a displayTimeUnit "ns" that comes BEFORE
// traceEvents makes ts/dur nanoseconds (TraceHeader::ts_unit_ns), as other Chrome-JSON
// producers mean it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "importers/trace_input.h"

namespace grademl::importers::chrome_json {

// One value of an event's `args` (top-level keys only).
struct ArgValue {
  enum Kind { kInt, kDouble, kString, kBool, kNull, kOther } kind = kNull;
  int64_t i = 0;        // kInt; kBool: 0 or 1
  double d = 0;         // kDouble (and kInt, as a double)
  std::string_view s;   // kString: unescaped; kInt, kDouble: the number's text as written (for
                        // exact conversions); kOther (object, array, an integer beyond int64): raw JSON text
};

struct RawTraceEvent {
  uint64_t offset = 0;             // byte offset of the event's '{' in the uncompressed input
  char ph = 0;                     // 'X','B','E','i','I','C','s','t','f','b','e','n','M',... 0 when missing
  std::string_view name, cat;      // unescaped
  bool pid_is_int = false; int64_t pid = 0; std::string_view pid_str;   // pid may be a string ("CPU functions")
  bool tid_is_int = false; int64_t tid = 0; std::string_view tid_str;
  std::optional<int64_t> ts_ns, dur_ns;  // exact; see the file comment for units
  bool ts_float = false;           // ts written as a JSON float (or a string with a '.' or an exponent)
  std::string_view id;             // id / id2.local / id2.global as text ("" when none)
  std::string_view bp, s;          // flow binding point, instant scope
  std::vector<std::pair<std::string_view, ArgValue>> args;  // top-level args keys, in order
  // Extension: the first known field whose value could not be used (a ts that is not a
  // number, a pid that is an object, a ts beyond int64 ns, ...): "ts", "dur", "pid", "tid",
  // "ph", "name", "cat", "id", "args"; "" when none. That field is left unset; the event is
  // still delivered so that the importer can count it per reason.
  std::string_view bad_field;
};

struct TraceHeader {
  std::optional<int64_t> base_time_ns;   // baseTimeNanoseconds
  std::string display_time_unit;         // displayTimeUnit as written ("" when absent)
  std::optional<int64_t> schema_version;
  std::optional<int64_t> rank, world_size;  // distributedInfo
  std::string backend;                      // distributedInfo.backend ("nccl", "gloo")
  std::vector<std::string> device_names;    // deviceProperties[].name, in file order
  bool bare_array = false;                  // a bare array of events (no top-level object)
  // Extensions:
  bool ts_unit_ns = false;   // ts/dur were read as ns (displayTimeUnit "ns" before traceEvents)
  int64_t events = 0;        // events delivered
  uint64_t bytes = 0;        // uncompressed bytes read
};

struct ReadOptions {
  // An event (or a header field kept: distributedInfo, deviceProperties) larger than this is
  // an error: it bounds the reader's memory whatever the input.
  size_t max_event_bytes = size_t{64} << 20;
};

// Calls on_event for each event in file order (views valid during the call only); returns
// the header (complete once the whole file was read) or the first error:
// "PATH: byte N: what". If on_event returns a non-OK Status, reading stops with it.
StatusOr<TraceHeader> ReadChromeTrace(TraceInput& input,
                                      const std::function<Status(const RawTraceEvent&)>& on_event,
                                      const ReadOptions& options = {});

// Content sniffing: does this look like Chrome trace JSON (after decompression)?
// A bare array whose first element is an object (or empty), or an object whose first key is
// a Chrome-trace key (traceEvents, schemaVersion, deviceProperties, ...) or whose first
// bytes contain "traceEvents".
bool LooksLikeChromeTrace(std::string_view first_bytes);

// Exact conversion of a decimal number's text ("123", "-4.5", "1.5e3", "1712195495519689.047")
// times 10^scale_pow10 to an int64, rounded to nearest (ties away from zero); nullopt when
// the text is not a decimal number or the result does not fit. ts in µs: scale_pow10 = 3.
std::optional<int64_t> DecimalToInt64(std::string_view text, int scale_pow10);

}  // namespace grademl::importers::chrome_json
