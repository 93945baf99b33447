import json, os, statistics, subprocess, sys
HERE = os.path.dirname(os.path.abspath(__file__))
pairs, epochs = int(sys.argv[1]), int(sys.argv[2]); modes = sys.argv[3].split(",")
rows = {m: [] for m in modes}
for _ in range(pairs):
    for m in modes:
        out = subprocess.run([sys.executable, os.path.join(HERE, "drive.py"), m, sys.executable, os.path.join(HERE, "mlp_loaded.py"), "--epochs", str(epochs)], capture_output=True, text=True)
        rows[m].append(json.loads(out.stdout.strip().splitlines()[-1]))
b = rows[modes[0]]
for m in modes:
    r = rows[m]
    first = statistics.median(x["epochs_ms"][0] for x in r)
    steady = statistics.median(statistics.median(x["epochs_ms"][1:]) for x in r)
    tot = statistics.median(x["train_cpu_s"] for x in r)
    flt = statistics.median(x["minflt"] for x in r)
    ratios = [statistics.median(x["epochs_ms"][1:]) / statistics.median(y["epochs_ms"][1:]) for x, y in zip(r, b)]
    print(f"{m:7} total {tot:.4f}s ({tot/statistics.median(x['train_cpu_s'] for x in b):.3f}x)  epoch1 {first:.2f} ms  steady epoch {steady:.2f} ms ({steady/statistics.median(statistics.median(x['epochs_ms'][1:]) for x in b):.4f}x, per-pair ratios {min(ratios):.3f}-{max(ratios):.3f})  minflt {flt}")
