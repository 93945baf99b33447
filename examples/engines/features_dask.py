#!/usr/bin/env python3
"""Step 2 - features, with Dask: data/raw/part-*.csv -> data/features.npz.

Starts a Dask LocalCluster of 2 worker processes (1 thread each) and builds the features
as a Dask dataframe graph, one partition per CSV file:

  * the label: the trip was tipped well (tip >= 15% of the fare);
  * per trip: fare per km, speed, night, the hour on a circle, log distance;
  * from the older files (the history): each rider's tip rate and trip count, each zone's
    tip rate, joined onto the newer trips (no label leaks from a trip into its own features).

Under `grademl run` every Dask task is recorded as a phase under the worker process that ran
it, with the graph's dependencies as dataflow edges (docs/engines.md); the program itself
knows nothing of GradeML. The newer trips are split into train and test (by rider, so one
rider's trips stay on one side), standardised with the training split's mean and scale.
"""
import argparse
import glob
import os
import sys
import time

import numpy as np

FEATURES = ["distance_log", "duration_min", "fare_per_km", "speed_kmh", "night", "hour_sin", "hour_cos",
            "rider_rate", "rider_trips_log", "zone_rate"]


def build(ddf, history_parts):
    import dask.dataframe as dd

    ddf = ddf.assign(tipped=(ddf.tip >= 0.15 * ddf.fare).astype("float64"))
    history = ddf.partitions[:history_parts]
    recent = ddf.partitions[history_parts:]

    rider = history.groupby("rider_id").agg({"tipped": "mean", "fare": "count"})
    rider = rider.rename(columns={"tipped": "rider_rate", "fare": "rider_trips"})
    zone = history.groupby("zone").agg({"tipped": "mean"}).rename(columns={"tipped": "zone_rate"})
    overall = history.tipped.mean()

    recent = recent.merge(rider, left_on="rider_id", right_index=True, how="left")
    recent = recent.merge(zone, left_on="zone", right_index=True, how="left")
    recent = recent.assign(
        distance_log=np.log1p(recent.distance_km),
        fare_per_km=recent.fare / recent.distance_km,
        speed_kmh=60.0 * recent.distance_km / recent.duration_min.clip(lower=0.5),
        night=((recent.hour >= 22) | (recent.hour < 5)).astype("float64"),
        hour_sin=np.sin(recent.hour * (2 * np.pi / 24)),
        hour_cos=np.cos(recent.hour * (2 * np.pi / 24)),
        rider_trips_log=np.log1p(recent.rider_trips.fillna(0)),
    )
    return recent, overall, dd


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default="data/raw", help="directory of part-*.csv (default: %(default)s)")
    p.add_argument("--out", default="data/features.npz", help="output archive (default: %(default)s)")
    p.add_argument("--workers", type=int, default=2, help="Dask worker processes (default: %(default)s)")
    p.add_argument("--history-frac", type=float, default=0.8,
                   help="share of the files used as history for the per-rider features (default: %(default)s)")
    p.add_argument("--test-frac", type=float, default=0.2, help="riders held out for testing (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = p.parse_args()
    files = sorted(glob.glob(os.path.join(args.input, "part-*.csv")))
    if len(files) < 2:
        sys.exit(f"features_dask: error: need at least 2 part-*.csv files in {args.input} (run generate.py first)")
    if not 0 < args.history_frac < 1 or not 0 < args.test_frac < 1:
        p.error("--history-frac and --test-frac must be in (0, 1)")

    import dask
    import dask.dataframe as dd
    from dask.distributed import Client, LocalCluster

    t0 = time.time()
    history_parts = min(len(files) - 1, max(1, int(round(len(files) * args.history_frac))))
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, local_directory=os.path.abspath("data/dask-worker-space")) as cluster, \
            Client(cluster) as client:
        ddf = dd.read_csv(files, blocksize=None)  # one partition per file
        recent, overall, _ = build(ddf, history_parts)
        # The graph dask.compute runs (optimised as it does): its size is printed below.
        tasks = len(dask.base.collections_to_dsk([recent, overall], optimize_graph=True))
        recent, overall = dask.compute(recent, overall)
        workers = len(client.scheduler_info()["workers"])

    recent = recent.fillna({"rider_rate": overall, "zone_rate": overall})
    rng = np.random.default_rng(args.seed)
    riders = recent.rider_id.unique()
    test_riders = set(rng.choice(riders, size=max(1, int(len(riders) * args.test_frac)), replace=False).tolist())
    is_test = recent.rider_id.isin(test_riders).to_numpy()
    X = recent[FEATURES].to_numpy(dtype=np.float32)
    y = recent.tipped.to_numpy(dtype=np.float32)
    mean = X[~is_test].mean(axis=0)
    scale = X[~is_test].std(axis=0) + 1e-6
    X = (X - mean) / scale
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    np.savez(args.out, X_train=X[~is_test], y_train=y[~is_test], X_test=X[is_test], y_test=y[is_test],
             mean=mean, scale=scale, columns=np.array(FEATURES))
    print(f"features_dask: {len(files)} files ({history_parts} as history), {tasks} Dask tasks on {workers} workers -> "
          f"{int((~is_test).sum())} train / {int(is_test.sum())} test rows, {len(FEATURES)} features, "
          f"tipped {y.mean():.1%}, in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
