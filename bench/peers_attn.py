#!/usr/bin/env python3
"""Torch peers of the fly-attn bench (tests/examples/attn_bench.rs: the portable and the
Hopper kernel through fly-attn's public API), on the H200.

Generates the same deterministic inputs as the Rust bench (`value` there; BSHD layout,
Sq = Skv = S), times `F.scaled_dot_product_attention` with the flash backend and with the
cuDNN backend, each forced (`torch.nn.attention.sdpa_kernel`), with the same method (CUDA
events, a 256 MiB L2 flush before each rep, warm-up, median of 20), counts TFLOP/s over the
unmasked region (4 D flops per visible pair; causal with Sq = Skv: S (S + 1) / 2 pairs per
head), writes $OUT/attn_peers.json and prints a side-by-side table with
$OUT/attn_ours.json (one row per fly-attn kernel; ours / flash and ours / cuDNN). The
inputs are passed as BSHD views
(`transpose(1, 2)` of [B, S, H, D]), as our kernel reads them.
Usage: python3 peers_attn.py   (ATTN_BENCH_QUICK=1: only (8, 4096, 16/16), as the Rust bench)
"""
import json
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

OUT = os.environ.get("OUT", ".")
DEV = "cuda"
FLUSH = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=DEV)
SHAPES = [(16, 1024, 16, 16), (8, 4096, 16, 16), (2, 16384, 16, 16), (8, 4096, 64, 8)]
# Decode-like shapes of attn_bench.rs (`DECODE`): (B, Skv, Hq, Hkv, D), one query row.
DECODE = [(1, 32768, 32, 8, 128), (8, 8192, 32, 8, 128), (16, 4096, 16, 16, 128),
          (4, 65536, 64, 8, 64)]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
BACKENDS = {"sdpa flash": SDPBackend.FLASH_ATTENTION, "sdpa cudnn": SDPBackend.CUDNN_ATTENTION}


def values(seed, n, dtype):
    i = torch.arange(n, dtype=torch.int64, device=DEV)
    h = ((i + seed * 0x9E3779B9) * 2654435761) & 0xFFFFFFFF
    return (h.to(torch.float64) / 4294967296.0 * 2.0 - 1.0).to(torch.float32).to(dtype)


def bench(fn, reps=20):
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


def decode(rows):
    """SDPA (flash, cuDNN, each forced) at the decode shapes, bf16, and a copy of the K and V
    bytes (the ceiling of a kernel that reads them once): GB/s of K+V read."""
    dt = DTYPES["bf16"]
    for b, skv, hq, hkv, d in DECODE:
        q = values(1, b * hq * d, dt).view(b, 1, hq, d).transpose(1, 2)
        k = values(2, b * skv * hkv * d, dt).view(b, skv, hkv, d).transpose(1, 2)
        v = values(3, b * skv * hkv * d, dt).view(b, skv, hkv, d).transpose(1, 2)
        kv_bytes = 2 * k.numel() * k.element_size()
        shape = [b, 1, skv, hq, hkv, d]
        src = torch.empty(kv_bytes // 8, dtype=torch.int64, device=DEV)
        dst = torch.empty_like(src)
        ms = bench(lambda: dst.copy_(src))
        # A copy reads and writes: its GB/s counts both, as the copy ceiling does.
        rows.append({"op": "attention_decode", "impl": "copy of K+V", "dtype": "bf16",
                     "shape": shape, "median_ms": ms, "kv_gbs": 2 * kv_bytes / (ms * 1e-3) / 1e9})
        del src, dst
        for name, be in BACKENDS.items():
            def run():
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=hkv != hq)
            try:
                run()
                ms = bench(run)
            except Exception as e:  # a backend that refuses the shape
                print(f"decode {name} B={b} Skv={skv} H={hq}/{hkv} D={d}: unavailable "
                      f"({str(e).splitlines()[0]})")
                continue
            gbs = kv_bytes / (ms * 1e-3) / 1e9
            rows.append({"op": "attention_decode", "impl": name, "dtype": "bf16",
                         "shape": shape, "median_ms": ms, "kv_gbs": gbs})
            print(f"decode {name} bf16 B={b:>2} Skv={skv:>5} H={hq:>2}/{hkv:>2} D={d:>3} "
                  f"{ms:9.4f} ms {gbs:7.0f} GB/s of K+V", flush=True)
        del q, k, v
        torch.cuda.empty_cache()


def decode_table(rows, ours_rows):
    peer = {}
    for r in rows:
        if r["op"] == "attention_decode":
            peer.setdefault(tuple(r["shape"]), {})[r["impl"]] = r["kv_gbs"]
    print("\n| decode B, Skv, Hq/Hkv, D | ours GB/s | flash | cuDNN | copy of K+V | ours / copy "
          "| ours / flash | ours / cuDNN |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for o in ours_rows:
        if o.get("op") != "attention_decode":
            continue
        p = peer.get(tuple(o["shape"]), {})
        b, _, skv, hq, hkv, d = o["shape"]
        g = o["kv_gbs"]
        f = lambda x: f"{x:.0f}" if x else "-"  # noqa: E731
        r = lambda x: f"{g / x:.2f}" if x else "-"  # noqa: E731
        cp, fl, cu = p.get("copy of K+V"), p.get("sdpa flash"), p.get("sdpa cudnn")
        print(f"| {b}, {skv}, {hq}/{hkv}, {d} | {g:.0f} | {f(fl)} | {f(cu)} | {f(cp)} | {r(cp)} "
              f"| {r(fl)} | {r(cu)} |")


def main():
    quick = os.environ.get("ATTN_BENCH_QUICK") == "1"
    shapes = SHAPES[1:2] if quick else SHAPES
    rows = []
    for b, s, hq, hkv in shapes:
        for d in (64, 128):
            for causal in (False, True):
                for dname, dt in DTYPES.items():
                    q = values(1, b * s * hq * d, dt).view(b, s, hq, d).transpose(1, 2)
                    k = values(2, b * s * hkv * d, dt).view(b, s, hkv, d).transpose(1, 2)
                    v = values(3, b * s * hkv * d, dt).view(b, s, hkv, d).transpose(1, 2)
                    pairs = s * (s + 1) / 2 if causal else s * s
                    flops = 4.0 * d * pairs * b * hq
                    ref = None
                    for name, be in BACKENDS.items():
                        def run():
                            with sdpa_kernel(be):
                                return F.scaled_dot_product_attention(
                                    q, k, v, is_causal=causal, enable_gqa=hkv != hq)
                        try:
                            o = run()
                            ms = bench(run)
                        except Exception as e:  # a backend that refuses the shape
                            print(f"{name} {dname} B={b} S={s} H={hq}/{hkv} D={d} "
                                  f"causal={causal}: unavailable ({str(e).splitlines()[0]})")
                            continue
                        if ref is None:
                            ref = o.float()
                        err = (o.float() - ref).abs().max().item()
                        tf = flops / (ms * 1e-3) / 1e12
                        rows.append({"op": "attention", "impl": name, "dtype": dname,
                                     "shape": [b, s, hq, hkv, d], "causal": causal,
                                     "median_ms": ms, "tflops": tf})
                        print(f"{name} {dname:>4} B={b:>2} S={s:>5} H={hq:>2}/{hkv:>2} D={d:>3} "
                              f"{'causal' if causal else 'full':>6} {ms:9.4f} ms {tf:7.1f} "
                              f"TFLOP/s (max |diff| vs first backend {err:.1e})", flush=True)
                    del q, k, v, ref
                    torch.cuda.empty_cache()
    if os.environ.get("ATTN_DECODE") != "0":
        decode(rows)
    with open(os.path.join(OUT, "attn_peers.json"), "w") as f:
        json.dump(rows, f, indent=1)
    try:
        ours_rows = json.load(open(os.path.join(OUT, "attn_ours.json")))
    except (OSError, ValueError) as e:
        print(f"no attn_ours.json to compare: {e}")
        return
    key = lambda r: (r["dtype"], tuple(r["shape"]), r["causal"])  # noqa: E731
    peer = {}
    for r in rows:
        if r["op"] == "attention":
            peer.setdefault(key(r), {})[r["impl"]] = r["tflops"]
    print("\n| ours | dtype | B, S, Hq/Hkv, D | causal | ours TFLOP/s | flash | cuDNN | ours/flash | ours/cuDNN |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for o in ours_rows:
        if o.get("op", "attention") != "attention":
            continue
        p = peer.get(key(o), {})
        fl, cu = p.get("sdpa flash"), p.get("sdpa cudnn")
        b, s, hq, hkv, d = o["shape"]
        f = lambda x: f"{x:.0f}" if x else "-"  # noqa: E731
        r = lambda x: f"{o['tflops'] / x:.2f}" if x else "-"  # noqa: E731
        print(f"| {o['impl']} | {o['dtype']} | {b}, {s}, {hq}/{hkv}, {d} | {o['causal']} | {o['tflops']:.0f} | "
              f"{f(fl)} | {f(cu)} | {r(fl)} | {r(cu)} |")
    decode_table(rows, ours_rows)


if __name__ == "__main__":
    main()
