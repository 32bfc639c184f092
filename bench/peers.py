#!/usr/bin/env python3
"""Torch peers for flydsl-rs's norm and softmax benchmarks, on the H200.

Times, with the same method as our Rust bench (CUDA events per rep, a 256 MB L2 flush
before each rep, warm-up, median): the device copy ceiling (4 GiB), a copy of each forward
shape's activations (`copy_at_shape`: the same bytes read and written as a forward moves,
so the fastest any forward of that shape can be), and torch eager and
torch.compile for RMSNorm / LayerNorm forward, softmax forward, autograd backward of the
norms and torch._softmax_backward_data, on the shapes of the issues. Writes
$OUT/peers.json (rows: op, impl, dtype, shape, median_ms, GBps).
Usage: PYTHONUNBUFFERED=1 python3 peers.py [--quick] [--shape MxN]... [--dtype D]...
`--shape` (repeatable) times those shapes for every op instead of the default lists, and
`--dtype` (repeatable: bf16, f16, f32) only those dtypes, as `cargo xtask bench` does with
the same flags (the backward ops then also run in the chosen dtypes).
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

OUT = os.environ.get("OUT", ".")
QUICK = "--quick" in sys.argv
DEV = "cuda"
FLUSH = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=DEV)
ROWS = []
T0 = time.time()
BUDGET = float(os.environ.get("PEERS_BUDGET_S", "240"))

FWD_SHAPES = [(32768, 8192), (4096, 8192), (32768, 4096), (8192, 2048), (65536, 1024)]
NORM_BWD_SHAPES = [(4096, 8192), (32768, 4096)]
SMX_BWD_SHAPES = [(32768, 8192), (4096, 32768), (2048, 65536)]
DT = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}
FWD_DTYPES = ["bf16", "f32"]
BWD_DTYPES = ["bf16"]


def flag_values(name):
    """Every value of a repeatable `--name V` flag."""
    out = []
    for i, a in enumerate(sys.argv):
        if a == name and i + 1 < len(sys.argv):
            out.append(sys.argv[i + 1])
    return out


USER_SHAPES = [tuple(int(d) for d in s.split("x")) for s in flag_values("--shape")]
if USER_SHAPES:
    assert all(len(s) == 2 for s in USER_SHAPES), "--shape takes MxN"
    FWD_SHAPES = NORM_BWD_SHAPES = SMX_BWD_SHAPES = USER_SHAPES
USER_DTYPES = flag_values("--dtype")
if USER_DTYPES:
    assert all(d in DT for d in USER_DTYPES), "--dtype takes bf16, f16 or f32"
    FWD_DTYPES = BWD_DTYPES = USER_DTYPES


def bench(fn, rep_ms=100.0 if not QUICK else 40.0):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 3.0, 1e-3)
    n = int(min(max(rep_ms / est, 10), 1000))
    for _ in range(int(min(max(20.0 / est, 3), 200))):
        fn()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        FLUSH.zero_()
        st[i].record()
        fn()
        en[i].record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) for a, b in zip(st, en))
    return ts[len(ts) // 2]


def add(op, impl, dtype, shape, ms, nbytes):
    gbs = nbytes / (ms * 1e-3) / 1e9
    ROWS.append({"op": op, "impl": impl, "dtype": dtype, "shape": list(shape),
                 "median_ms": ms, "bytes": nbytes, "GBps": gbs})
    print("%-14s %-10s %-5s %-14s %9.4f ms %8.1f GB/s" % (op, impl, dtype, shape, ms, gbs),
          flush=True)
    with open(os.path.join(OUT, "peers.json"), "w") as f:
        json.dump({"rows": ROWS, "device": torch.cuda.get_device_name()}, f, indent=1)


def over():
    return time.time() - T0 > BUDGET


def main():
    torch.manual_seed(0)
    n = 1 << 29  # 4 GiB of bytes in int64 (copy read + write counted)
    a = torch.empty(n, dtype=torch.int64, device=DEV)
    b = torch.empty_like(a)
    add("copy", "torch", "i64", (n,), bench(lambda: b.copy_(a)), 2 * a.numel() * 8)
    del a, b
    def compiled(f):
        # One compiled function per shape with dynamic=False: a function reused across
        # shapes is recompiled with dynamic shapes, and its kernels run slower.
        torch._dynamo.reset()
        return torch.compile(f, dynamic=False)

    for dt in FWD_DTYPES:
        for (m, k) in FWD_SHAPES:
            if over():
                break
            t = DT[dt]
            x = torch.randn(m, k, device=DEV, dtype=t)
            w = torch.rand(k, device=DEV, dtype=t)
            bb = torch.rand(k, device=DEV, dtype=t)
            es = x.element_size()
            norm_bytes = 2 * m * k * es + k * es
            yc = torch.empty_like(x)
            add("copy_at_shape", "torch", dt, (m, k), bench(lambda: yc.copy_(x)), 2 * m * k * es)
            del yc
            rms = lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6)
            ln = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
            smx = lambda x: torch.softmax(x, -1)
            add("rmsnorm_fwd", "eager", dt, (m, k), bench(lambda: rms(x, w)), norm_bytes)
            crms = compiled(rms)
            add("rmsnorm_fwd", "compile", dt, (m, k), bench(lambda: crms(x, w)), norm_bytes)
            add("layernorm_fwd", "eager", dt, (m, k), bench(lambda: ln(x, w, bb)), norm_bytes + k * es)
            cln = compiled(ln)
            add("layernorm_fwd", "compile", dt, (m, k), bench(lambda: cln(x, w, bb)), norm_bytes + k * es)
            add("softmax_fwd", "eager", dt, (m, k), bench(lambda: smx(x)), 2 * m * k * es)
            csmx = compiled(smx)
            add("softmax_fwd", "compile", dt, (m, k), bench(lambda: csmx(x)), 2 * m * k * es)
            del x
    for dt in BWD_DTYPES:
        t = DT[dt]
        es = torch.empty(0, dtype=t).element_size()
        for (m, k) in NORM_BWD_SHAPES:
            if over():
                break
            x = torch.randn(m, k, device=DEV, dtype=t, requires_grad=True)
            w = torch.rand(k, device=DEV, dtype=t, requires_grad=True)
            dy = torch.randn(m, k, device=DEV, dtype=t)
            y = F.rms_norm(x, (k,), w, 1e-6)
            # dx written, x and dy read, dgamma: counted once each.
            nbytes = 3 * m * k * es + 2 * k * es
            add("rmsnorm_bwd", "autograd", dt, (m, k),
                bench(lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True)), nbytes)
            bb = torch.rand(k, device=DEV, dtype=t, requires_grad=True)
            y2 = F.layer_norm(x, (k,), w, bb, 1e-5)
            add("layernorm_bwd", "autograd", dt, (m, k),
                bench(lambda: torch.autograd.grad(y2, (x, w, bb), dy, retain_graph=True)),
                nbytes + k * es)
            del x, dy, y, y2
        for (m, k) in SMX_BWD_SHAPES:
            if over():
                break
            y = torch.softmax(torch.randn(m, k, device=DEV, dtype=t), -1)
            dy = torch.randn(m, k, device=DEV, dtype=t)
            add("softmax_bwd", "eager", dt, (m, k),
                bench(lambda: torch._softmax_backward_data(dy, y, -1, t)), 3 * m * k * es)
            del y, dy
    print("peers done in %.0f s" % (time.time() - T0))


if __name__ == "__main__":
    main()
