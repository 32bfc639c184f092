#!/usr/bin/env python3
"""Torch peer of the GEMM proof bench (tests/examples/gemm_bench.rs), on the H200.

Generates the same deterministic bf16 inputs as the Rust bench (`value` there), times
`a @ b.t()` (cuBLAS through torch.matmul) with the same method (CUDA events, a 256 MiB L2
flush before each rep, warm-up, median of 30), writes $OUT/gemm_peers.json and prints a
side-by-side table with $OUT/gemm_ours.json (TFLOP/s and ours / torch).
Usage: python3 peers_gemm.py
"""
import json
import os

import torch

OUT = os.environ.get("OUT", ".")
DEV = "cuda"
FLUSH = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=DEV)
SHAPES = [
    (8192, 8192, 8192),
    (4096, 8192, 8192),
    (1024, 8192, 8192),
    (4096, 5120, 8192),
    (8192, 5120, 8192),
    (4096, 4096, 14336),
    (8192, 4096, 14336),
    (4096, 28672, 4096),
    (8192, 28672, 4096),
]


def value_py(seed, i):
    h = ((i + seed * 0x9E3779B9) * 2654435761) % (1 << 64) % (1 << 32)
    return h / 4294967296.0 * 2.0 - 1.0


def values(seed, n):
    i = torch.arange(n, dtype=torch.int64, device=DEV)
    h = ((i + seed * 0x9E3779B9) * 2654435761) & 0xFFFFFFFF
    x = (h.to(torch.float64) / 4294967296.0 * 2.0 - 1.0).to(torch.float32).to(torch.bfloat16)
    for j in [0, 1, n // 3, n - 1]:  # the same values as the Rust bench's `value`
        want = torch.tensor(value_py(seed, j), dtype=torch.float32).to(torch.bfloat16)
        assert x[j].item() == want.item(), (seed, j, x[j].item(), want.item())
    return x


def bench(fn, reps=30):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        FLUSH.zero_()
        st[i].record()
        fn()
        en[i].record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) for a, b in zip(st, en))
    return ts[len(ts) // 2]


def main():
    rows = []
    for m, n, k in SHAPES:
        a = values(1, m * k).view(m, k)
        b = values(2, n * k).view(n, k)
        ms = bench(lambda: a @ b.t())
        tf = 2.0 * m * n * k / (ms * 1e-3) / 1e12
        rows.append({"op": "gemm", "impl": "torch.matmul", "dtype": "bf16",
                     "shape": [m, n, k], "median_ms": ms, "tflops": tf})
        print(f"torch.matmul bf16 {m:>5}x{n:>5}x{k:>5} {ms:9.4f} ms {tf:7.1f} TFLOP/s", flush=True)
        del a, b
        torch.cuda.empty_cache()
    with open(os.path.join(OUT, "gemm_peers.json"), "w") as f:
        json.dump(rows, f, indent=1)
    try:
        ours_rows = json.load(open(os.path.join(OUT, "gemm_ours.json")))
    except (OSError, ValueError) as e:
        print(f"no gemm_ours.json to compare: {e}")
        return
    peer = {tuple(r["shape"]): r for r in rows}
    print("\n| kernel | M x N x K | ours TFLOP/s | torch.matmul TFLOP/s | ours / torch |")
    print("|---|---|---:|---:|---:|")
    for o in ours_rows:
        r = peer.get(tuple(o["shape"]))
        if r:
            m, n, k = o["shape"]
            print(f"| {o['impl']} | {m}x{n}x{k} | {o['tflops']:.0f} | {r['tflops']:.0f} | "
                  f"{o['tflops'] / r['tflops']:.2f} |")


if __name__ == "__main__":
    main()
