// Private hooks of the event writer, for tests and benchmarks only. Not part of the API.
#pragma once

#include <stdint.h>

#include <string>

#include "instrument/event_format.h"

namespace grademl::instrument {

// Detaches from the current event file (if any) and returns to the uninitialised state, as
// a forked child does: the next call reads GRADEML_EVENTS_DIR again and creates a new file,
// in which every name interned so far is defined again with its id. `max_chunks` caps the
// chunks the next files may use (to test a full file cheaply). Only the calling thread may
// be using the writer; other threads' per-thread state must not be used afterwards.
void ResetForTesting(uint64_t max_chunks = kMaxChunks);

// The path of the current event file, or "" when there is none.
std::string CurrentFilePathForTesting();

}  // namespace grademl::instrument
