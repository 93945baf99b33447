// Estimates how far this host's clock is from a reference clock (the run store's) with
// four-timestamp exchanges, as NTP and Perfetto do: t1 sent here, t2 received there, t3 sent
// there, t4 received here give offset = ((t2 - t1) + (t3 - t4)) / 2 and round trip
// (t4 - t1) - (t3 - t2); the offset is off by at most half the round trip. Of several
// exchanges the one with the smallest round trip is kept.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace grademl::collect {

struct ClockExchange {
  TimeNs t1 = 0, t2 = 0, t3 = 0, t4 = 0;
};

struct ClockOffset {
  DurationNs offset_ns = 0;       // add to this host's time to get the reference's
  DurationNs uncertainty_ns = 0;  // half the round trip: the most the offset can be off
  DurationNs round_trip_ns = 0;
};

ClockOffset OffsetOfExchange(const ClockExchange& e);
// The exchange with the smallest round trip; InvalidArgument for none, or for one whose
// round trip is negative (a clock went backwards within it).
StatusOr<ClockOffset> BestOffset(const std::vector<ClockExchange>& exchanges);

// Runs `exchanges` exchanges: local_now() (t1), reference_now() read by the reference at once
// (t2 = t3), local_now() (t4); an exchange whose reference read fails is skipped. The error of
// the last failure when every exchange failed.
StatusOr<ClockOffset> MeasureOffset(const std::function<StatusOr<TimeNs>()>& reference_now,
                                    const std::function<TimeNs()>& local_now, int exchanges = 8);

// MeasureOffset, repeated up to `rounds` times (a short pause between) while the best round
// trip is over `good_enough_ns` (a busy reference or network); the best of all rounds.
StatusOr<ClockOffset> MeasureOffsetCarefully(const std::function<StatusOr<TimeNs>()>& reference_now,
                                             const std::function<TimeNs()>& local_now, int exchanges = 8,
                                             int rounds = 4, DurationNs good_enough_ns = 400 * kNsPerUs);

}  // namespace grademl::collect
