#!/usr/bin/env python3
"""Step 4b - train_baseline: data/features.npz -> models/baseline.pkl (scikit-learn).

Default model: an RBF support-vector classifier (single-threaded libsvm).
Alternatives: --model hgb (HistGradientBoosting), rf (RandomForest, n_jobs=1;
note its pickle is tens of MB) or logreg (LogisticRegression; weak on the
shifted copies).  BLAS/OpenMP pools are limited to --threads (default 1) so
that it can run in parallel with train_cnn.py on two cores.

The pickle is a dict {"model": estimator, "kind": str, "train_accuracy": float}
(no timings, so it is byte-identical between runs with the same inputs).
"""
import argparse
import os
import pickle
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits


def make_model(kind, seed):
    if kind == "svc":
        from sklearn.svm import SVC
        return SVC(C=5.0, gamma="scale", random_state=seed)
    if kind == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier
        return HistGradientBoostingClassifier(max_iter=100, random_state=seed)
    if kind == "rf":
        from sklearn.ensemble import RandomForestClassifier
        return RandomForestClassifier(n_estimators=100, max_depth=14, max_features=0.15,
                                      n_jobs=1, random_state=seed)
    if kind == "logreg":
        from sklearn.linear_model import LogisticRegression
        return LogisticRegression(max_iter=2000, n_jobs=1)
    raise ValueError(kind)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default="data/features.npz", help="features archive (default: %(default)s)")
    p.add_argument("--out", default="models/baseline.pkl", help="output pickle (default: %(default)s)")
    p.add_argument("--model", choices=["svc", "hgb", "rf", "logreg"], default="svc",
                   help="estimator (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = p.parse_args()

    t0 = time.time()
    if not os.path.exists(args.input):
        sys.exit(f"train_baseline: error: input {args.input} not found (run features.py first)")
    data = np.load(args.input)
    X, y = data["X_train"], data["y_train"]
    model = make_model(args.model, args.seed)
    with threadpool_limits(limits=args.threads):
        t = time.time()
        model.fit(X, y)
        fit_s = time.time() - t
        sub = np.random.default_rng(args.seed).choice(len(X), size=min(len(X), 2000), replace=False)
        train_acc = float((model.predict(X[sub]) == y[sub]).mean())

    d = os.path.dirname(args.out)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(args.out, "wb") as f:
        pickle.dump({"model": model, "kind": args.model, "train_accuracy": train_acc}, f, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"train_baseline: fitted {type(model).__name__} on {len(X)} rows in {fit_s:.1f}s "
          f"(train accuracy {train_acc:.4f}), saved {args.out} in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
