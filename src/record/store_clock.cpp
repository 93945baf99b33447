#include "record/store_clock.h"

namespace grademl::record {

StatusOr<collect::ClockOffset> RecordStoreClock(store::Database& db, model::RunBuilder& builder,
                                                const std::string& host, TimeNs t) {
  StatusOr<collect::ClockOffset> o =
      collect::MeasureOffsetCarefully([&] { return db.StoreClockNs(); }, [] { return WallClock::Now(); }, 8);
  if (o.ok()) {
    builder.AddClockEstimate({.host = host, .t = t, .offset_ns = o->offset_ns, .uncertainty_ns = o->uncertainty_ns});
  }
  return o;
}

}  // namespace grademl::record
