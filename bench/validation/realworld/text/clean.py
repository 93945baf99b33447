#!/usr/bin/python3
"""Text pipeline, stage 2 of 4: reads the reviews with pandas, cleans and tokenizes each one
in Python (lower case, punctuation out, stop words out), writes the token strings as CSV.
One thread: the row-wise `apply` runs in the interpreter."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import truth  # noqa: E402

truth.start("clean")
import pandas as pd  # noqa: E402

src, out = sys.argv[1], sys.argv[2]
df = pd.read_csv(src)
punct = re.compile(r"[^a-z0-9 ]+")
stop = {f"w{i}" for i in range(0, 3000, 7)}


suffixes = ("ing", "ed", "ly", "est", "er", "s")


def stem(word):
    for suffix in suffixes:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[:-len(suffix)]
    return word


def tokens(text):
    return " ".join(stem(w) for w in punct.sub(" ", text.lower()).split() if w not in stop)


for rnd in range(3):  # later passes normalise what the earlier produced, as cleaning chains do
    df["tokens"] = df["text" if rnd == 0 else "tokens"].apply(tokens)
truth.count("rows", len(df))
df[["tokens", "label"]].to_csv(out, index=False)
truth.finish()
