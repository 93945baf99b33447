#!/usr/bin/python3
"""Text pipeline, stage 1 of 4: writes synthetic product reviews (text, label) as CSV.
Pure Python, one thread."""
import csv
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import truth  # noqa: E402

truth.start("generate")
out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 60000
rng = random.Random(0)
common = [f"w{i}" for i in range(3000)]
good = ["great", "excellent", "love", "perfect", "fast", "recommend", "happy", "solid"]
bad = ["broken", "terrible", "refund", "slow", "awful", "disappointed", "waste", "poor"]
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["text", "label"])
    for _ in range(n):
        label = rng.random() < 0.5
        words = rng.choices(common, k=rng.randint(20, 60)) + rng.choices(good if label else bad, k=3)
        rng.shuffle(words)
        text = " ".join(words).capitalize() + rng.choice([".", "!", "!!", " :)", " :("])
        w.writerow([text, int(label)])
        truth.count("documents")
truth.finish()
