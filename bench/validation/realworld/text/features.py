#!/usr/bin/python3
"""Text pipeline, stage 3 of 4: TF-IDF features (scikit-learn) of the cleaned tokens,
saved as a sparse matrix with the labels."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import truth  # noqa: E402

truth.start("features")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import scipy.sparse  # noqa: E402
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402

src, out = sys.argv[1], sys.argv[2]
df = pd.read_csv(src)
x = TfidfVectorizer(min_df=2, sublinear_tf=True).fit_transform(df["tokens"])
scipy.sparse.save_npz(out, x.tocsr())
np.save(out + ".labels.npy", df["label"].to_numpy())
truth.count("features", x.shape[1])
truth.finish()
