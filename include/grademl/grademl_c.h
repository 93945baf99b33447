/* GradeML instrumentation: the C ABI, exported from libgrademl.so (and in the static
 * grademl_instrument library). Phases, tags, instants, counters and flows are written to
 * an event file in $GRADEML_EVENTS_DIR (see docs/instrumentation.md). Without that
 * variable every call is a cheap no-op.
 *
 * Threading: every function is thread-safe. Phases nest per thread: grademl_end() ends
 * the innermost phase begun on the calling thread. Not async-signal-safe.
 * Fork: a forked child writes its own file (named after its pid) on its next call. */
#ifndef GRADEML_GRADEML_C_H_
#define GRADEML_GRADEML_C_H_

#include <stdint.h>

#if defined(GRADEML_BUILDING_SHARED)
#define GRADEML_API __attribute__((visibility("default")))
#else
#define GRADEML_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when events are being recorded (GRADEML_EVENTS_DIR set and the file opened), else 0. */
GRADEML_API int grademl_enabled(void);
/* A name's id (0 when disabled, or when the event file is full). Thread-safe; ids are stable
 * for the life of the process (a forked child keeps them). Names longer than 1024 bytes are
 * truncated. */
GRADEML_API uint32_t grademl_intern(const char* name);
/* Begins a phase on the calling thread. */
GRADEML_API void grademl_begin(uint32_t name_id);
/* Begins a phase whose type differs from its name (e.g. name "epoch 3", type "epoch"). */
GRADEML_API void grademl_begin_typed(uint32_t name_id, uint32_t type_id);
/* Ends the innermost open phase of the calling thread (ignored when none is open). */
GRADEML_API void grademl_end(void);
/* Tags the innermost open phase of the calling thread with key=value. */
GRADEML_API void grademl_tag(uint32_t key_id, uint32_t value_id);
GRADEML_API void grademl_tag_str(const char* key, const char* value);
/* Tags the innermost open phase with key=<the integer in decimal>, without interning the value:
 * for values that differ on every call (sequence numbers, sizes). */
GRADEML_API void grademl_tag_int(uint32_t key_id, int64_t value);
/* A zero-length phase. */
GRADEML_API void grademl_instant(uint32_t name_id);
/* A sample of the counter `name_id`. */
GRADEML_API void grademl_counter(uint32_t name_id, double value);
/* The innermost open phase produces data `flow_id`, consumed by phases that call
 * grademl_flow_in(flow_id), in any thread or process of the run. */
GRADEML_API void grademl_flow_out(uint64_t flow_id);
GRADEML_API void grademl_flow_in(uint64_t flow_id);
/* The event clock's current reading (raw ticks: the TSC on x86-64, else CLOCK_MONOTONIC ns),
 * 0 when disabled. Only for grademl_begin_at / grademl_end_at. */
GRADEML_API uint64_t grademl_now(void);
/* Begins a phase on the calling thread that started at `ticks` (a grademl_now() reading,
 * possibly taken on another thread): for an operation timed elsewhere and recorded once it
 * completed (an asynchronous collective). type_id 0: untyped. It nests under the innermost
 * open phase of this thread that began at or before it. Close it with grademl_end_at. */
GRADEML_API void grademl_begin_at(uint32_t name_id, uint32_t type_id, uint64_t ticks);
/* Ends the innermost open phase of the calling thread at `ticks` (a grademl_now() reading). */
GRADEML_API void grademl_end_at(uint64_t ticks);
/* Tags the calling process's own phase (not the innermost open phase) with key=value, from
 * any thread, with or without open phases: e.g. rank=3 of a distributed job. */
GRADEML_API void grademl_tag_process(uint32_t key_id, uint32_t value_id);
/* grademl_begin(grademl_intern(name)), through a per-thread cache. */
GRADEML_API void grademl_begin_str(const char* name);

#ifdef __cplusplus
}
#endif

#endif /* GRADEML_GRADEML_C_H_ */
