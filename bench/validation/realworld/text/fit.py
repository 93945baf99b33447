#!/usr/bin/python3
"""Text pipeline, stage 4 of 4: fits a linear model (scikit-learn's LogisticRegression) on
80% of the TF-IDF rows and scores it on the rest."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import truth  # noqa: E402

truth.start("fit")
import numpy as np  # noqa: E402
import scipy.sparse  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

src = sys.argv[1]
x = scipy.sparse.load_npz(src)
y = np.load(src + ".labels.npy")
cut = int(0.8 * x.shape[0])
model = LogisticRegression(C=4.0, max_iter=300).fit(x[:cut], y[:cut])
print(f"accuracy {model.score(x[cut:], y[cut:]):.3f}", flush=True)
truth.finish()
