// A compact, versioned binary encoding of model::RunDelta, for the per-host agent that spools
// deltas to a local file before uploading them. The bytes outlive the process that wrote them
// and may come back truncated or damaged, so DecodeRunDelta treats its input as hostile: it
// never crashes, loops or allocates more than a small constant factor of the input's size
// (~32x at most: an empty string decodes from 1 byte into a 32-byte std::string), and
// rejects anything EncodeRunDelta could not have written. Every accepted input is canonical:
// EncodeRunDelta(*DecodeRunDelta(x)) == x. There is no checksum: a damaged byte inside a
// number or a string decodes to a different value; callers that must detect that keep a
// checksum beside the bytes.
//
// Format, version kRunDeltaCodecVersion (all multi-byte values little-endian):
//   uvarint   LEB128, 7 bits a byte, at most 10 bytes, shortest form only (no 0x80 0x00)
//   svarint   an int64 as the uvarint of its zigzag form ((v << 1) ^ (v >> 63))
//   i32       an svarint whose value fits int32_t (pids, Track::device, LogLine::stream, exits)
//   f64       8 bytes, the double's bit pattern (NaN payloads and -0.0 kept)
//   bool      1 byte, 0 or 1
//   enum      a uvarint, one of the enum's declared values
//   str       uvarint byte length, then the bytes (any bytes: NUL, invalid UTF-8)
//   vec<T>    uvarint count, then the elements
//   opt<T>    bool present, then T when present
//   tags      vec<(str key, str value)>
// A delta:
//   magic     4 bytes "GDLT"
//   version   uvarint kRunDeltaCodecVersion
//   info      opt<RunInfo>: svarint id, str uuid, vec<str> command, str cwd, str host,
//             svarint start_ns, svarint end_ns, opt<i32> exit_code, opt<i32> exit_signal,
//             bool complete, str error, str grademl_version, svarint interval_ns,
//             f64 monitor_cpu_seconds (not its owner: the store sets it, a delta never does)
//   phases    vec<Phase>: svarint id, svarint parent, str name, str type, tags tags,
//             svarint start_ns, svarint end_ns, str host, i32 pid, svarint track
//   edges     vec<Edge>: svarint from, svarint to, str kind
//   resources vec<Resource>: svarint id, svarint parent, enum kind, str name, str host,
//             i32 pid, svarint phase, svarint start_ns
//   series    vec<SeriesInfo>: svarint id, svarint resource, str name, str unit, enum kind,
//             f64 capacity
//   samples   vec<SampleRecord>: svarint series - previous record's series, svarint t -
//             previous record's t (both differences taken modulo 2^64; the first record's
//             "previous" is 0), f64 v
//   logs      vec<LogLine>: svarint phase, svarint t, i32 stream, str text
//   hosts     vec<Host>: str name, str machine_id, svarint clock_offset_ns,
//             svarint clock_uncertainty_ns
//   sources   vec<Source>: svarint id, str path, str format, tags tags
//   tracks    vec<Track>: svarint id, enum kind, svarint source, str host, i32 pid,
//             svarint process_start_ns, svarint tid, i32 device, svarint stream, str name
//   stats     vec<IngestStat>: svarint source, str reason, svarint count, enum severity,
//             str description (version 3)
//   clocks    vec<ClockEstimate>: str host, svarint t, svarint offset_ns, svarint uncertainty_ns
//   steps     vec<StepExecution> (version 2): svarint phase, str step, str workflow, str key,
//             str not_reusable, str outcome, str reused_from, svarint cost_ns,
//             svarint restore_ns, svarint hash_ns, svarint hashed_bytes,
//             svarint materialize_ns, vec<artifact> inputs, vec<artifact> outputs;
//             artifact (StepArtifact): str path, str hash, svarint size, bool directory
//   (nothing after the last section)
//
// A field added to one of these structs makes delta_codec.cpp fail to compile (each struct is
// read and written through a structured binding of all its fields) until it is added here.
// Any change to the bytes must bump kRunDeltaCodecVersion: DeltaCodecTest.GoldenBytes fails
// on any change, as the reminder. A decoder reads only its own version: deltas spooled by
// another version are rejected as kCorrupt ("unsupported version").
//
// An enum value outside its declared values (a cast from a bad int) is encoded as is, and
// is then rejected by DecodeRunDelta.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "model/run_builder.h"

namespace grademl::model {

inline constexpr std::string_view kRunDeltaCodecMagic = "GDLT";
inline constexpr uint32_t kRunDeltaCodecVersion = 3;  // 2: step executions; 3: ingest stats' severity

// Encodes every field of `delta` exactly (see above). Fast: no allocation per sample.
std::string EncodeRunDelta(const RunDelta& delta);

// Decodes bytes written by EncodeRunDelta. Fails with kCorrupt and a one-line message that
// names the byte offset and the field for: input cut short, a bad magic or version, a
// non-canonical or over-long varint, a bool byte other than 0/1, an enum value out of range,
// an integer that does not fit its field, a count or length larger than the bytes left can
// hold (checked before anything is allocated), or bytes after the last section.
StatusOr<RunDelta> DecodeRunDelta(std::string_view bytes);

}  // namespace grademl::model
