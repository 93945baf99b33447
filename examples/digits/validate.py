#!/usr/bin/env python3
"""Step 2 - validate: data/raw.csv -> data/clean.csv + data/validation.json.

Checks the schema (source_id, 64 pixel columns, label), drops rows with
missing values, pixels outside 0..16, labels outside 0..9, and exact duplicate
rows, then writes the clean rows and a JSON report with the counts.  Exits
non-zero if the schema is wrong or if more than --max-drop-frac of the rows
would be dropped (something is badly wrong upstream).
"""
import argparse
import json
import os
import sys
import time

import pandas as pd

PIXELS = [f"pixel_{r}_{c}" for r in range(8) for c in range(8)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default="data/raw.csv", help="input CSV (default: %(default)s)")
    p.add_argument("--out", default="data/clean.csv", help="clean CSV (default: %(default)s)")
    p.add_argument("--report", default="data/validation.json", help="JSON report (default: %(default)s)")
    p.add_argument("--max-drop-frac", type=float, default=0.05,
                   help="fail if more than this fraction of rows is dropped (default: %(default)s)")
    args = p.parse_args()

    t0 = time.time()
    if not os.path.exists(args.input):
        sys.exit(f"validate: error: input {args.input} not found (run acquire.py first)")
    df = pd.read_csv(args.input)
    expected = ["source_id"] + PIXELS + ["label"]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        sys.exit(f"validate: error: {args.input} lacks columns {missing[:5]}{'...' if len(missing) > 5 else ''}")
    df = df[expected]
    n_in = len(df)
    if n_in == 0:
        sys.exit(f"validate: error: {args.input} has no rows")

    na = df.isna().any(axis=1)
    df = df[~na]
    px = df[PIXELS]
    bad_px = ((px < 0) | (px > 16) | (px != px.round())).any(axis=1)
    bad_label = ~df["label"].isin(range(10))
    bad_id = df["source_id"] < 0
    bad = bad_px | bad_label | bad_id
    df = df[~bad]
    dup = df.duplicated(keep="first")
    df = df[~dup].astype("int64")

    report = {
        "input": args.input,
        "output": args.out,
        "rows_in": int(n_in),
        "rows_out": int(len(df)),
        "dropped_missing": int(na.sum()),
        "dropped_pixel_range": int(bad_px.sum()),
        "dropped_label_range": int((bad_label & ~bad_px).sum()),
        "dropped_bad_source_id": int((bad_id & ~bad_px & ~bad_label).sum()),
        "dropped_duplicates": int(dup.sum()),
        "label_counts": {str(k): int(v) for k, v in df["label"].value_counts().sort_index().items()},
        "source_images": int(df["source_id"].nunique()),
    }
    dropped = n_in - len(df)
    report["dropped_total"] = int(dropped)
    report["ok"] = dropped <= args.max_drop_frac * n_in and len(df) > 0

    for path in (args.out, args.report):
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
    with open(args.report, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    if not report["ok"]:
        sys.exit(f"validate: error: {dropped}/{n_in} rows invalid (> {args.max_drop_frac:.0%}); "
                 f"see {args.report}")
    df.to_csv(args.out, index=False)
    print(f"validate: {n_in} rows in, {len(df)} clean rows to {args.out} "
          f"(dropped {report['dropped_missing']} missing, {report['dropped_pixel_range']} pixel range, "
          f"{report['dropped_label_range']} label, {report['dropped_duplicates']} duplicates) "
          f"in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
