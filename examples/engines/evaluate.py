#!/usr/bin/env python3
"""Step 4 - evaluate: models/mlp.pt + data/features.npz -> metrics.json.

Accuracy, ROC AUC and log loss of the data-parallel MLP on the held-out riders, next to a
baseline that always predicts the training split's majority class.
"""
import argparse
import json
import sys

import numpy as np
import torch
from sklearn.metrics import log_loss, roc_auc_score

from train_ddp import make_model


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", default="data/features.npz", help="features archive (default: %(default)s)")
    p.add_argument("--model", default="models/mlp.pt", help="trained model (default: %(default)s)")
    p.add_argument("--out", default="metrics.json", help="metrics file (default: %(default)s)")
    args = p.parse_args()
    try:
        data = np.load(args.features)
        saved = torch.load(args.model)
    except (OSError, FileNotFoundError) as e:
        sys.exit(f"evaluate: error: {e}")
    model = make_model(saved["n_features"], saved["hidden"])
    model.load_state_dict(saved["state"])
    model.eval()
    with torch.no_grad():
        prob = torch.sigmoid(model(torch.from_numpy(data["X_test"])).squeeze(1)).numpy()
    y = data["y_test"]
    majority = float(data["y_train"].mean() >= 0.5)
    metrics = {"test_rows": int(len(y)), "accuracy": float(((prob >= 0.5) == (y >= 0.5)).mean()),
               "roc_auc": float(roc_auc_score(y, prob)), "log_loss": float(log_loss(y, np.clip(prob, 1e-6, 1 - 1e-6))),
               "baseline_accuracy": float((y == majority).mean())}
    with open(args.out, "w") as f:
        json.dump(metrics, f, indent=2)
    print(f"evaluate: accuracy {metrics['accuracy']:.3f} (baseline {metrics['baseline_accuracy']:.3f}), "
          f"AUC {metrics['roc_auc']:.3f} on {metrics['test_rows']} trips")


if __name__ == "__main__":
    main()
