// Private hooks of the event writer, for tests and benchmarks only. Not part of the API.
#pragma once

#include <stdint.h>

#include "instrument/event_format.h"

namespace grademl::instrument {

// Detaches from the current event memory (if any) and returns to the uninitialised state,
// as a forked child does: the next call reads GRADEML_EVENTS_DIR again, connects to the
// collector's socket there and hands it new memory, in which every name interned so far is
// defined again with its id. `max_chunks` caps the chunks the next memories may use (to
// test a full memory cheaply); reservations stop failing. Only the calling thread may be
// using the writer; other threads' per-thread state must not be used afterwards.
void ResetForTesting(uint64_t max_chunks = kMaxChunks);

// Makes every later chunk reservation (fallocate) fail, as when memory runs out.
void FailReservationsForTesting(bool fail);

// The writer's descriptor of its current event memory (a sealed memfd), or -1.
int CurrentMemoryFdForTesting();

}  // namespace grademl::instrument
