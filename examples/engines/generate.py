#!/usr/bin/env python3
"""Step 1 - generate: writes data/raw/part-NNN.csv, a synthetic log of taxi-like trips.

Each row is one trip: rider_id, zone, hour, distance_km, duration_min, fare, tip. Whether a
trip is "tipped well" (the label the training step predicts) depends on the fare per km, the
hour, the zone and the rider's habits, so the features the Dask step computes per rider and
per zone carry real signal. Deterministic for a given --seed. No download.

Size knob: ENGINES_SCALE (env, default 1.0: 400,000 trips in 16 partitions).
"""
import argparse
import os
import sys

import numpy as np
import pandas as pd


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="data/raw", help="output directory (default: %(default)s)")
    p.add_argument("--partitions", type=int, default=16, help="CSV files to write (default: %(default)s)")
    p.add_argument("--rows", type=int, default=None,
                   help="trips in all (default: 400000 x ENGINES_SCALE)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = p.parse_args()
    try:
        scale = float(os.environ.get("ENGINES_SCALE", "1.0"))
    except ValueError:
        sys.exit("generate: error: ENGINES_SCALE must be a number")
    rows = args.rows if args.rows is not None else max(2000, int(400_000 * scale))
    if args.partitions < 1 or rows < args.partitions:
        sys.exit("generate: error: need at least one row per partition")

    rng = np.random.default_rng(args.seed)
    riders = max(50, rows // 40)
    generosity = rng.normal(0.0, 1.0, riders)         # each rider's own habit
    zone_bias = rng.normal(0.0, 0.7, 24)               # 24 zones
    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):
        if old.startswith("part-") and old.endswith(".csv"):
            os.remove(os.path.join(args.out, old))

    per_part = rows // args.partitions
    for part in range(args.partitions):
        n = per_part if part < args.partitions - 1 else rows - per_part * (args.partitions - 1)
        rider = rng.integers(0, riders, n)
        zone = rng.integers(0, 24, n)
        hour = rng.integers(0, 24, n)
        distance = rng.gamma(2.0, 2.5, n) + 0.3
        duration = distance * rng.uniform(1.8, 4.5, n) + rng.exponential(3.0, n)
        fare = 2.5 + 1.6 * distance + 0.3 * duration + rng.normal(0, 0.5, n)
        night = ((hour >= 22) | (hour < 5)).astype(float)
        logit = 0.9 * generosity[rider] + zone_bias[zone] + 0.6 * night - 0.08 * (fare / distance - 3.5) \
            + rng.normal(0, 0.8, n)
        tip = np.where(logit > 0, fare * rng.uniform(0.18, 0.3, n), fare * rng.uniform(0.0, 0.1, n))
        df = pd.DataFrame({"rider_id": rider, "zone": zone, "hour": hour, "distance_km": distance.round(3),
                           "duration_min": duration.round(2), "fare": fare.round(2), "tip": tip.round(2)})
        df.to_csv(os.path.join(args.out, f"part-{part:03d}.csv"), index=False)
    print(f"generate: {rows} trips of {riders} riders in {args.partitions} files under {args.out}")


if __name__ == "__main__":
    main()
