#!/usr/bin/env python3
"""Writes a synthetic Kineto-shaped Chrome trace of about SIZE_MB megabytes (uncompressed) for
the parse benchmark (bench/trace_parse_bench.sh): per training step, CPU ops, CUDA runtime
launches with their ac2g flows, and GPU kernels and memcpys with Kineto's args, timestamps in
epoch microseconds with nanosecond decimals (like HTA's ns-resolution trace), pretty-printed
the way Kineto writes them. Deterministic (seeded). usage: make_synthetic_trace.py OUT SIZE_MB"""
import random
import sys

out_path, size_mb = sys.argv[1], float(sys.argv[2])
target = int(size_mb * 1e6)
rng = random.Random(13)
names = ["aten::mm", "aten::addmm", "aten::relu", "aten::conv2d", "aten::add_", "aten::copy_",
         "autograd::engine::evaluate_function: AddmmBackward0", "Optimizer.step#SGD.step"]
kernels = ["void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, float*)",
           "ampere_sgemm_128x64_tn", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
           "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)"]
parts = []
written = 0
with open(out_path, "w") as f:
    head = ('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "Synthetic GPU", '
            '"totalGlobalMem": 42297524224,\n      "computeMajor": 8, "computeMinor": 0, "numSms": 108\n    }\n  ],\n'
            '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n  "traceEvents": [\n')
    f.write(head)
    written += len(head)
    ts = 1712195495519689.047
    corr = 1000
    step = 0
    first = True
    while written < target:
        step += 1
        events = [f'''  {{
    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 1102, "tid": 1102,
    "ts": {ts:.3f}, "dur": 5000.000,
    "args": {{
      "External id": {corr}, "Record function id": 0, "Ev Idx": {corr}
    }}
  }}''']
        for _ in range(50):
            corr += 1
            op_ts = ts + rng.uniform(0, 4000)
            dur = rng.uniform(1, 200)
            events.append(f'''  {{
    "ph": "X", "cat": "cpu_op", "name": "{rng.choice(names)}", "pid": 1102, "tid": 1102,
    "ts": {op_ts:.3f}, "dur": {dur:.3f},
    "args": {{
      "External id": {corr}, "Sequence number": {corr * 3}, "Fwd thread id": 0, "Record function id": 0, "Ev Idx": {corr}
    }}
  }}''')
            events.append(f'''  {{
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1102, "tid": 1102,
    "ts": {op_ts + 1:.3f}, "dur": 4.120,
    "args": {{
      "External id": {corr}, "cbid": 211, "correlation": {corr}
    }}
  }}''')
            events.append(f'''  {{
    "ph": "s", "id": {corr}, "pid": 1102, "tid": 1102, "ts": {op_ts + 1:.3f},
    "cat": "ac2g", "name": "ac2g"
  }}''')
            k_ts = op_ts + rng.uniform(5, 50)
            events.append(f'''  {{
    "ph": "X", "cat": "kernel", "name": "{rng.choice(kernels)}", "pid": 0, "tid": 7,
    "ts": {k_ts:.3f}, "dur": {rng.uniform(1, 300):.3f},
    "args": {{
      "External id": {corr},
      "queued": 0, "device": 0, "context": 1,
      "stream": 7, "correlation": {corr},
      "registers per thread": 32,
      "shared memory": 0,
      "blocks per SM": 1.703704,
      "warps per SM": 6.814815,
      "grid": [184, 1, 1],
      "block": [128, 1, 1],
      "est. achieved occupancy %": 11
    }}
  }}''')
            events.append(f'''  {{
    "ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {k_ts:.3f},
    "cat": "ac2g", "name": "ac2g", "bp": "e"
  }}''')
        text = (",\n" if not first else "") + ",\n".join(events)
        first = False
        f.write(text)
        written += len(text)
        ts += 5000.0
    tail = '\n  ],\n  "traceName": "synthetic.json",\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1711964646000000000\n}\n'
    f.write(tail)
