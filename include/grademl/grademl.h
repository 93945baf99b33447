// GradeML instrumentation: the C++ API. A thin, inline layer over the C ABI
// (grademl/grademl_c.h); link grademl_instrument (static) or libgrademl.so.
//
//   void train_step() {
//     GRADEML_PHASE("forward");                      // scoped: ends at the closing brace
//     ...
//   }
//   GRADEML_PHASE("epoch", "epoch", std::to_string(e).c_str());   // with one key=value tag
//   grademl::Counter("loss", loss);
//
// GRADEML_PHASE interns its (static) name once per call site, so each use costs a check of
// the enabled flag, two clock reads and two 16-byte appends to the thread's chunk.
// With GRADEML_DISABLE defined, everything compiles to nothing.
#pragma once

#include <grademl/grademl_c.h>

#include <charconv>
#include <cstdint>

namespace grademl {

#if !defined(GRADEML_DISABLE)

inline bool Enabled() { return grademl_enabled() != 0; }
inline std::uint32_t Intern(const char* name) { return grademl_intern(name); }

inline void Begin(std::uint32_t name_id) { grademl_begin(name_id); }
inline void Begin(const char* name) { grademl_begin_str(name); }
inline void BeginTyped(const char* name, const char* type) {
  grademl_begin_typed(grademl_intern(name), grademl_intern(type));
}
inline void End() { grademl_end(); }

// Tags the innermost open phase of this thread.
inline void Tag(const char* key, const char* value) { grademl_tag_str(key, value); }
inline void Tag(const char* key, long long value) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf) - 1, value);
  *r.ptr = '\0';
  grademl_tag_str(key, buf);
}

inline void Instant(std::uint32_t name_id) { grademl_instant(name_id); }
inline void Instant(const char* name) { grademl_instant(grademl_intern(name)); }
inline void Counter(std::uint32_t name_id, double value) { grademl_counter(name_id, value); }
inline void Counter(const char* name, double value) { grademl_counter(grademl_intern(name), value); }
inline void FlowOut(std::uint64_t flow_id) { grademl_flow_out(flow_id); }
inline void FlowIn(std::uint64_t flow_id) { grademl_flow_in(flow_id); }
// Tags this process's own phase (not the innermost open phase), e.g. TagProcess("rank", "3").
inline void TagProcess(const char* key, const char* value) {
  grademl_tag_process(grademl_intern(key), grademl_intern(value));
}
// An operation timed elsewhere, recorded once it completed: Now() at its start, then
// Complete(name, type, start, Now()) on any thread (see grademl_begin_at).
inline std::uint64_t Now() { return grademl_now(); }
inline void Complete(const char* name, const char* type, std::uint64_t start, std::uint64_t end) {
  grademl_begin_at(grademl_intern(name), type != nullptr ? grademl_intern(type) : 0, start);
  grademl_end_at(end);
}

// A scoped phase: begins in the constructor, ends in the destructor.
class Phase {
 public:
  explicit Phase(std::uint32_t name_id) { grademl_begin(name_id); }
  explicit Phase(const char* name) { grademl_begin_str(name); }
  Phase(std::uint32_t name_id, const char* key, const char* value) {
    grademl_begin(name_id);
    grademl_tag_str(key, value);
  }
  Phase(std::uint32_t name_id, const char* key, long long value) {
    grademl_begin(name_id);
    grademl::Tag(key, value);
  }
  ~Phase() { grademl_end(); }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

  // Tags this phase (it must be the innermost open phase of the thread).
  const Phase& Tag(const char* key, const char* value) const {
    grademl_tag_str(key, value);
    return *this;
  }
  const Phase& Tag(const char* key, long long value) const {
    grademl::Tag(key, value);
    return *this;
  }
};

#else  // GRADEML_DISABLE: inline no-ops.

inline bool Enabled() { return false; }
inline std::uint32_t Intern(const char*) { return 0; }
inline void Begin(std::uint32_t) {}
inline void Begin(const char*) {}
inline void BeginTyped(const char*, const char*) {}
inline void End() {}
inline void Tag(const char*, const char*) {}
inline void Tag(const char*, long long) {}
inline void Instant(std::uint32_t) {}
inline void Instant(const char*) {}
inline void Counter(std::uint32_t, double) {}
inline void Counter(const char*, double) {}
inline void FlowOut(std::uint64_t) {}
inline void FlowIn(std::uint64_t) {}
inline void TagProcess(const char*, const char*) {}
inline std::uint64_t Now() { return 0; }
inline void Complete(const char*, const char*, std::uint64_t, std::uint64_t) {}
class Phase {
 public:
  explicit Phase(std::uint32_t) {}
  explicit Phase(const char*) {}
  Phase(std::uint32_t, const char*, const char*) {}
  Phase(std::uint32_t, const char*, long long) {}
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
  const Phase& Tag(const char*, const char*) const { return *this; }
  const Phase& Tag(const char*, long long) const { return *this; }
};

#endif

}  // namespace grademl

#define GRADEML_CONCAT_INNER_(a, b) a##b
#define GRADEML_CONCAT_(a, b) GRADEML_CONCAT_INNER_(a, b)

#if !defined(GRADEML_DISABLE)
// GRADEML_PHASE(name) or GRADEML_PHASE(name, tag_key, tag_value): a phase from here to the
// end of the enclosing scope. `name` should be a string literal (it is interned once, at
// the first use of this call site); the tag value may be any string or integer.
#define GRADEML_PHASE(name, ...) GRADEML_PHASE_N_(__COUNTER__, name __VA_OPT__(, ) __VA_ARGS__)
#define GRADEML_PHASE_N_(n, name, ...)                                                          \
  GRADEML_PHASE_IMPL_(GRADEML_CONCAT_(grademl_phase_id_, n), GRADEML_CONCAT_(grademl_phase_, n), \
                      name __VA_OPT__(, ) __VA_ARGS__)
#define GRADEML_PHASE_IMPL_(id_var, phase_var, name, ...)            \
  static const ::std::uint32_t id_var = ::grademl::Intern(name); \
  const ::grademl::Phase phase_var(id_var __VA_OPT__(, ) __VA_ARGS__)
#else
#define GRADEML_PHASE(...) static_assert(true)
#endif
