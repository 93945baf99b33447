#!/usr/bin/env python3
"""Regenerates the seed corpus of chrome_trace_fuzz (tests/fuzz/corpus/chrome_trace/) from the
project's own Chrome-trace fixtures (tests/data/chrome_traces): each file as it is, gzip- and
zstd-compressed (zstd when the `zstd` program is there), cut in half (a truncated trace), and
with a byte flipped in the middle. Run it after changing the fixtures; the seeds are committed."""
import gzip
import pathlib
import shutil
import subprocess

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests/fuzz/corpus/chrome_trace"
shutil.rmtree(out, ignore_errors=True)
out.mkdir(parents=True)
for src in sorted((root / "tests/data/chrome_traces").glob("*.json")):
    data = src.read_bytes()
    stem = src.stem
    (out / f"{stem}.json").write_bytes(data)
    (out / f"{stem}.json.gz").write_bytes(gzip.compress(data, mtime=0))
    if shutil.which("zstd"):
        z = subprocess.run(["zstd", "-q", "-c", "-3"], input=data, stdout=subprocess.PIPE, check=True).stdout
        (out / f"{stem}.json.zst").write_bytes(z)
    (out / f"{stem}.half.json").write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x22
    (out / f"{stem}.flipped.json").write_bytes(bytes(flipped))
print(f"{len(list(out.iterdir()))} seeds in {out.relative_to(root)}")
