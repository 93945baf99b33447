// Records this host's clock against the run store's (collect/clock_sync.h) as a clock
// estimate of the run: what `grademl run` (on a shared store, and with --join) and
// `grademl agent` do, so that the store can put the run's hosts on one clock at load.
#pragma once

#include <string>

#include "collect/clock_sync.h"
#include "model/run_builder.h"
#include "store/database.h"

namespace grademl::record {

// Measures (collect::MeasureOffsetCarefully against Database::StoreClockNs) and adds the
// estimate for `host` at this host's time `t`; the measurement, or why it failed (nothing is
// added then).
StatusOr<collect::ClockOffset> RecordStoreClock(store::Database& db, model::RunBuilder& builder,
                                                const std::string& host, TimeNs t);

}  // namespace grademl::record
