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

// Makes every later chunk reservation fail, as when memory runs out.
void FailReservationsForTesting(bool fail);

// The descriptor the writer reserves chunks through (the fallback reservation, chosen with
// GRADEML_WRITER_RESERVE=descriptor or on kernels without MADV_POPULATE_WRITE), or -1: in
// the usual reservation through the mapping the writer keeps no descriptor.
int ReservationDescriptorForTesting();

// The header of the current event memory (in the writer's mapping), or null.
const FileHeader* CurrentHeaderForTesting();

}  // namespace grademl::instrument
