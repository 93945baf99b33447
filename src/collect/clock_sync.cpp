#include "collect/clock_sync.h"

#include <chrono>
#include <limits>
#include <thread>

namespace grademl::collect {

ClockOffset OffsetOfExchange(const ClockExchange& e) {
  ClockOffset o;
  // Halves taken separately: the sums of epoch-ns timestamps overflow int64.
  o.offset_ns = (e.t2 - e.t1) / 2 + (e.t3 - e.t4) / 2;
  o.round_trip_ns = (e.t4 - e.t1) - (e.t3 - e.t2);
  o.uncertainty_ns = (o.round_trip_ns + 1) / 2;
  return o;
}

StatusOr<ClockOffset> BestOffset(const std::vector<ClockExchange>& exchanges) {
  if (exchanges.empty()) return InvalidArgument("no clock exchanges");
  ClockOffset best;
  best.round_trip_ns = std::numeric_limits<DurationNs>::max();
  for (const ClockExchange& e : exchanges) {
    ClockOffset o = OffsetOfExchange(e);
    if (o.round_trip_ns < 0) return InvalidArgument("clock exchange with a negative round trip ({} ns)", o.round_trip_ns);
    if (o.round_trip_ns < best.round_trip_ns) best = o;
  }
  return best;
}

StatusOr<ClockOffset> MeasureOffset(const std::function<StatusOr<TimeNs>()>& reference_now,
                                    const std::function<TimeNs()>& local_now, int exchanges) {
  std::vector<ClockExchange> done;
  Status last = InvalidArgument("no clock exchanges");
  for (int i = 0; i < exchanges; ++i) {
    ClockExchange e;
    e.t1 = local_now();
    StatusOr<TimeNs> there = reference_now();
    e.t4 = local_now();
    if (!there.ok()) {
      last = there.status();
      continue;
    }
    e.t2 = e.t3 = *there;
    done.push_back(e);
  }
  if (done.empty()) return last;
  return BestOffset(done);
}

StatusOr<ClockOffset> MeasureOffsetCarefully(const std::function<StatusOr<TimeNs>()>& reference_now,
                                             const std::function<TimeNs()>& local_now, int exchanges, int rounds,
                                             DurationNs good_enough_ns) {
  StatusOr<ClockOffset> best = InvalidArgument("no clock exchanges");
  for (int round = 0; round < rounds; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    StatusOr<ClockOffset> o = MeasureOffset(reference_now, local_now, exchanges);
    if (o.ok() && (!best.ok() || o->round_trip_ns < best->round_trip_ns)) best = o;
    if (!o.ok() && !best.ok()) best = o.status();
    if (best.ok() && best->round_trip_ns <= good_enough_ns) break;
  }
  return best;
}

}  // namespace grademl::collect
