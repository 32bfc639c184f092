#!/usr/bin/env python3
"""Torch peer of the GEMM proof bench (tests/examples/gemm_bench.rs), on the H200.

Generates the same deterministic bf16 inputs as the Rust bench (`value` there), times
`a @ b.t()` (cuBLAS through torch.matmul) with the same method (CUDA events, a 256 MiB L2
flush before each rep, warm-up, median of 30), writes $OUT/gemm_peers.json and prints a
side-by-side table with $OUT/gemm_ours.json (TFLOP/s and ours / torch).

The 8-bit part (GEMM8=0 skips it, GEMM16=0 skips the bf16 part): the same fp8 e4m3fn and
int8 inputs and scales as the Rust bench's `quant_inputs`, timed through
`torch._scaled_mm` (row-wise scales, bf16 out: the same computation as ours) and
`torch._int_mm` (int32 out, no scales: less work than ours; torch needs M > 16) at every
M in MS8 x (N, K) in SHAPES8.
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
    (1, 8192, 8192),
    (16, 8192, 8192),
    (128, 8192, 8192),
    (1, 5120, 8192),
    (16, 5120, 8192),
    (128, 5120, 8192),
    (1, 4096, 14336),
    (16, 4096, 14336),
    (128, 4096, 14336),
    (1, 28672, 4096),
    (16, 28672, 4096),
    (128, 28672, 4096),
]


MS8 = [1, 16, 128, 1024, 4096, 8192]
SHAPES8 = [(8192, 8192), (5120, 8192), (4096, 14336), (28672, 4096)]


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


def values_f32(seed, n):
    """`value_f32` of the Rust bench: the hash mapped to [-1, 1) in f64, rounded to f32."""
    i = torch.arange(n, dtype=torch.int64, device=DEV)
    h = ((i + seed * 0x9E3779B9) * 2654435761) & 0xFFFFFFFF
    x = (h.to(torch.float64) / 4294967296.0 * 2.0 - 1.0).to(torch.float32)
    for j in [0, 1, n // 3, n - 1]:  # the same values as the Rust bench's `value_f32`
        want = torch.tensor(value_py(seed, j), dtype=torch.float64).to(torch.float32)
        assert x[j].item() == want.item(), (seed, j, x[j].item(), want.item())
    return x


def quant_inputs(dtype, seed, n):
    """The Rust bench's `quant_inputs`: e4m3fn of 4 v, or int8 of round-half-even(127 v)."""
    x = values_f32(seed, n)
    if dtype == "fp8":
        return (x * 4.0).to(torch.float8_e4m3fn)
    return (x * 127.0).round().clamp(-127, 127).to(torch.int8)


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


def spot_error(c, a, b, sa, sb, m, n):
    """The Rust bench's spot check on torch's output: the same 64 (i, j), f64 reference of
    the exact fp8 values, worst |err| / sum |a b| (scales applied to both)."""
    ts = torch.arange(64, dtype=torch.int64)
    ii = ((ts * 7919) % m).tolist()
    jj = ((ts * 104_729) % n).tolist()
    worst = 0.0
    for i, j in zip(ii, jj):
        p = a[i].to(torch.float64) * b[j].to(torch.float64)
        s = sa[i, 0].double() * sb[0, j].double()
        want = p.sum() * s
        mag = p.abs().sum() * s
        err = (c[i, j].double() - want).abs() / mag.clamp_min(1e-30)
        worst = max(worst, err.item())
    return worst


def quant_peers(rows):
    mmax = max(MS8)
    sa_all = (1.0 + (torch.arange(mmax, device=DEV) % 8).float() / 8.0) / 256.0
    for dtype in ["fp8", "int8"]:
        for n, k in SHAPES8:
            a_all = quant_inputs(dtype, 1, mmax * k).view(mmax, k)
            b = quant_inputs(dtype, 2, n * k).view(n, k)
            sb = ((1.0 + (torch.arange(n, device=DEV) % 4).float() / 4.0) / 128.0).view(1, n)
            for m in MS8:
                a = a_all[:m].contiguous()
                sa = sa_all[:m].contiguous().view(m, 1)
                if dtype == "fp8":
                    name = "torch._scaled_mm"
                    fn = lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb,
                                                  out_dtype=torch.bfloat16)
                elif m > 16:
                    name = "torch._int_mm"
                    fn = lambda: torch._int_mm(a, b.t())
                else:
                    print(f"torch._int_mm needs M > 16: skipped {m}x{n}x{k}")
                    continue
                try:
                    ms = bench(fn)
                except RuntimeError as e:
                    print(f"{name} {dtype} {m}x{n}x{k}: {e}")
                    continue
                tf = 2.0 * m * n * k / (ms * 1e-3) / 1e12
                gbs = n * k / (ms * 1e-3) / 1e9
                worst = spot_error(fn(), a, b, sa, sb, m, n) if dtype == "fp8" else 0.0
                rows.append({"op": "gemm", "impl": name, "dtype": dtype, "shape": [m, n, k],
                             "median_ms": ms, "tflops": tf, "b_gbs": gbs, "worst": worst})
                print(f"{name} {dtype} {m:>5}x{n:>5}x{k:>5} {ms:9.4f} ms {tf:7.1f} TFLOP/s "
                      f"{gbs:7.0f} GB/s of B  spot-check worst |err|/sum|ab| = {worst:.2e}",
                      flush=True)
            del a_all, b
            torch.cuda.empty_cache()


def main():
    rows = []
    shapes16 = [] if os.environ.get("GEMM16") == "0" else SHAPES
    for m, n, k in shapes16:
        a = values(1, m * k).view(m, k)
        b = values(2, n * k).view(n, k)
        ms = bench(lambda: a @ b.t())
        tf = 2.0 * m * n * k / (ms * 1e-3) / 1e12
        rows.append({"op": "gemm", "impl": "torch.matmul", "dtype": "bf16",
                     "shape": [m, n, k], "median_ms": ms, "tflops": tf})
        print(f"torch.matmul bf16 {m:>5}x{n:>5}x{k:>5} {ms:9.4f} ms {tf:7.1f} TFLOP/s", flush=True)
        del a, b
        torch.cuda.empty_cache()
    if os.environ.get("GEMM8") != "0":
        quant_peers(rows)
    with open(os.path.join(OUT, "gemm_peers.json"), "w") as f:
        json.dump(rows, f, indent=1)
    try:
        ours_rows = json.load(open(os.path.join(OUT, "gemm_ours.json")))
    except (OSError, ValueError) as e:
        print(f"no gemm_ours.json to compare: {e}")
        return
    peer = {(r["dtype"], tuple(r["shape"])): r for r in rows}
    print("\n| kernel | dtype | M x N x K | ours TFLOP/s | peer | peer TFLOP/s | ours / peer |")
    print("|---|---|---|---:|---|---:|---:|")
    for o in ours_rows:
        r = peer.get((o["dtype"], tuple(o["shape"])))
        if r:
            m, n, k = o["shape"]
            print(f"| {o['impl']} | {o['dtype']} | {m}x{n}x{k} | {o['tflops']:.1f} | "
                  f"{r['impl']} | {r['tflops']:.1f} | {o['tflops'] / r['tflops']:.2f} |")


if __name__ == "__main__":
    main()
