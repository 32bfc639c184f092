#!/usr/bin/env python3
"""Shape sweep of fly-norm and fly-softmax against torch (issue #16, item 4).

Three steps, all on the same shape list:

  python3 sweep.py gen --family norm|softmax [--seed S] [--count N] > shapes.json
      A seeded random grid of N shapes (default 200): m in [1, 2^17], n in [1, 2^18], odd
      and even n, bf16 / f16 / f32, the activations between 4 KiB and 2 GiB, drawn class by
      class (CLASSES: the same number of shapes in each) so every class is measured.
  ./xtask bench --backend cuda --sweep shapes.json --rep-ms 20 --json ours.json
      Our kernels at those shapes (every op of the family).
  python3 sweep.py peers shapes.json [--workers K]   -> $OUT/peers_<family>.json
      torch eager and torch.compile (compiled per shape with dynamic=False) of the forwards,
      the autograd / _softmax_backward_data backwards, and a same-size copy, with the method
      of peers.py (CUDA events, 256 MiB L2 flush before each rep, warm-up, median). With
      --workers K, K processes first compile every shape's functions in parallel (filling
      Inductor's on-disk caches), so the timing process only pays cache hits.
  python3 sweep.py report shapes.json ours.json peers.json > sweep.md
      Per op and shape class: min / median / max of ours against each peer and of % of a
      same-size copy (>= 64 MiB), the issue's targets, and the ten worst shapes.

No shape is dropped from the report silently: a shape that one side could not run is listed.
"""
import json
import math
import os
import random
import subprocess
import sys
import time

# Bytes per element and elements per 128-bit vector.
ES = {"bf16": 2, "f16": 2, "f32": 4}
MIN_BYTES, MAX_BYTES = 4 << 10, 2 << 30
BIG = 64 << 20
# Shape classes of issue #16, in the order a shape is assigned to the first that matches.
CLASSES = ["ragged", "few-long", "tiny-n", "wide", "regular"]
CLASS_DOC = {
    "ragged": "n not a multiple of the 128-bit vector width",
    "few-long": "m <= 264 (2 rows per H200 SM), n >= 32768",
    "tiny-n": "n <= 256, m >= 4096",
    "wide": "n > 8192",
    "regular": "everything else",
}
# Ops of each family (ours and the peers use these names) and what each op moves.
OPS = {
    "norm": ["rmsnorm_fwd", "layernorm_fwd", "rmsnorm_bwd", "layernorm_bwd"],
    "softmax": ["softmax_fwd", "softmax_bwd"],
}


def shape_class(dtype, m, n):
    if n % (16 // ES[dtype]):
        return "ragged"
    if m <= 264 and n >= 32768:
        return "few-long"
    if n <= 256 and m >= 4096:
        return "tiny-n"
    if n > 8192:
        return "wide"
    return "regular"


def gen(family, seed, count):
    rnd = random.Random(seed)
    per = {c: count // len(CLASSES) + (i < count % len(CLASSES)) for i, c in enumerate(CLASSES)}
    got = {c: [] for c in CLASSES}
    seen = set()
    while any(len(got[c]) < per[c] for c in CLASSES):
        dtype = rnd.choice(list(ES))
        m = max(1, round(2 ** rnd.uniform(0, 17)))
        n = max(1, round(2 ** rnd.uniform(0, 18)))
        if rnd.random() < 0.5:  # half the draws are vector multiples, half left as drawn
            v = 16 // ES[dtype]
            n = max(v, n // v * v)
        if not MIN_BYTES <= m * n * ES[dtype] <= MAX_BYTES or (dtype, m, n) in seen:
            continue
        c = shape_class(dtype, m, n)
        if len(got[c]) < per[c]:
            seen.add((dtype, m, n))
            got[c].append({"dtype": dtype, "m": m, "n": n, "class": c})
    shapes = [s for c in CLASSES for s in got[c]]
    return {"family": family, "seed": seed, "classes": CLASS_DOC, "shapes": shapes}


def flag(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


# ---- torch side -------------------------------------------------------------------------


def peer_fns(family, dtype, m, n):
    """(op, impl, fn, bytes) of every peer at one shape; fn() runs it once."""
    import torch
    import torch.nn.functional as F

    t = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    es = ES[dtype]
    dev = "cuda"
    x = torch.randn(m, n, device=dev, dtype=t)
    out = []
    y = torch.empty_like(x)
    out.append(("copy_at_shape", "torch", lambda: y.copy_(x), 2 * m * n * es))

    def compiled(f):
        # One compiled function per shape with dynamic=False (see peers.py).
        torch._dynamo.reset()
        return torch.compile(f, dynamic=False)

    if family == "norm":
        w = torch.rand(n, device=dev, dtype=t)
        b = torch.rand(n, device=dev, dtype=t)
        rms = lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6)
        ln = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
        crms, cln = compiled(rms), compiled(ln)
        fb = 2 * m * n * es + n * es
        out += [
            ("rmsnorm_fwd", "eager", lambda: rms(x, w), fb),
            ("rmsnorm_fwd", "compile", lambda: crms(x, w), fb),
            ("layernorm_fwd", "eager", lambda: ln(x, w, b), fb + n * es),
            ("layernorm_fwd", "compile", lambda: cln(x, w, b), fb + n * es),
        ]
        xg = x.clone().requires_grad_(True)
        wg = w.clone().requires_grad_(True)
        bg = b.clone().requires_grad_(True)
        dy = torch.randn(m, n, device=dev, dtype=t)
        yr = F.rms_norm(xg, (n,), wg, 1e-6)
        yl = F.layer_norm(xg, (n,), wg, bg, 1e-5)
        bb = 3 * m * n * es + 2 * n * es
        out += [
            ("rmsnorm_bwd", "autograd",
             lambda: torch.autograd.grad(yr, (xg, wg), dy, retain_graph=True), bb),
            ("layernorm_bwd", "autograd",
             lambda: torch.autograd.grad(yl, (xg, wg, bg), dy, retain_graph=True), bb + n * es),
        ]
    else:
        smx = lambda x: torch.softmax(x, -1)
        csmx = compiled(smx)
        out += [
            ("softmax_fwd", "eager", lambda: smx(x), 2 * m * n * es),
            ("softmax_fwd", "compile", lambda: csmx(x), 2 * m * n * es),
        ]
        ys = torch.softmax(x, -1)
        dy = torch.randn(m, n, device=dev, dtype=t)
        out.append(("softmax_bwd", "eager",
                    lambda: torch._softmax_backward_data(dy, ys, -1, t), 3 * m * n * es))
    return out


def precompile(doc, part, parts):
    """Compile (run once) every peer of every `parts`-th shape starting at `part`."""
    import torch

    for i, s in enumerate(doc["shapes"]):
        if i % parts != part:
            continue
        for _, impl, fn, _ in peer_fns(doc["family"], s["dtype"], s["m"], s["n"]):
            if impl == "compile":
                fn()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def peers(doc, workers):
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import peers as P  # the timing method of the fixed-shape peers

    out = os.environ.get("OUT", ".")
    path = os.path.join(out, "peers_%s.json" % doc["family"])
    t0 = time.time()
    if workers > 1:
        me = os.path.abspath(__file__)
        shapes_file = os.path.join(out, "shapes_%s.json" % doc["family"])
        json.dump(doc, open(shapes_file, "w"))
        procs = [subprocess.Popen([sys.executable, me, "precompile", shapes_file,
                                   "--part", str(i), "--of", str(workers)],
                                  stdout=subprocess.DEVNULL)
                 for i in range(workers)]
        bad = [p.wait() for p in procs]
        print("precompiled %d shapes in %d workers: %.0f s (exit codes %s)"
              % (len(doc["shapes"]), workers, time.time() - t0, sorted(set(bad))), flush=True)
    rows = []
    n = 1 << 29
    a = torch.empty(n, dtype=torch.int64, device="cuda")
    b = torch.empty_like(a)
    copy_ms = P.bench(lambda: b.copy_(a), rep_ms=40.0)
    rows.append({"op": "copy", "impl": "torch", "dtype": "i64", "shape": [n],
                 "median_ms": copy_ms, "bytes": 16 * n, "GBps": 16 * n / (copy_ms * 1e-3) / 1e9})
    del a, b
    t1 = time.time()
    for i, s in enumerate(doc["shapes"]):
        for op, impl, fn, nbytes in peer_fns(doc["family"], s["dtype"], s["m"], s["n"]):
            try:
                ms = P.bench(fn, rep_ms=20.0)
            except Exception as e:  # reported, not hidden: the report lists missing peers
                print("peer failed: %s %s %s %dx%d: %s" % (op, impl, s["dtype"], s["m"], s["n"], e))
                continue
            rows.append({"op": op, "impl": impl, "dtype": s["dtype"], "shape": [s["m"], s["n"]],
                         "median_ms": ms, "bytes": nbytes, "GBps": nbytes / (ms * 1e-3) / 1e9})
        torch.cuda.empty_cache()
        if i % 20 == 19:
            print("peers: %d/%d shapes, %.0f s" % (i + 1, len(doc["shapes"]), time.time() - t1),
                  flush=True)
        json.dump({"rows": rows, "device": torch.cuda.get_device_name()}, open(path, "w"))
    print("peers done: %d shapes in %.0f s (compile included)" % (len(doc["shapes"]),
                                                                 time.time() - t0))


# ---- report -----------------------------------------------------------------------------


def stats(v):
    v = sorted(v)
    if not v:
        return "-", "-", "-"
    med = v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])
    return "%.2f" % v[0], "%.2f" % med, "%.2f" % v[-1]


def report(doc, ours, peers_rows):
    key = lambda r: (r["op"], r["dtype"], tuple(r["shape"]))
    mine = {key(r): r for r in ours}
    peer = {}
    for r in peers_rows:
        peer.setdefault(key(r), {})[r["impl"]] = r
    copy = max((r["GBps"] for r in peers_rows if r["op"] == "copy"), default=float("nan"))
    fam = doc["family"]
    lines = ["Sweep of %s: %d shapes, seed %d; copy ceiling %.0f GB/s." % (
        fam, len(doc["shapes"]), doc["seed"], copy), "",
        "Ratios are peer ms / our ms (above 1: ours is faster). `% copy` is ours against a "
        "same-size copy: the forward against torch's copy of the same bytes at that shape, the "
        "backward (3 tensors) against the 4 GiB copy ceiling; it is summarised over shapes of "
        "64 MiB and more. Classes: " + "; ".join(
            "%s: %s" % (c, CLASS_DOC[c]) for c in CLASSES) + ".", "",
        "| op | class | shapes | x eager min / med / max | x compile min / med / max "
        "| % copy >= 64 MiB min / med / max |",
        "|---|---|---:|---|---|---|"]
    worst, missing = [], []
    for op in OPS[fam]:
        for c in CLASSES:
            xe, xc, pc, cnt = [], [], [], 0
            for s in doc["shapes"]:
                if s["class"] != c:
                    continue
                k = (op, s["dtype"], (s["m"], s["n"]))
                r, p = mine.get(k), peer.get(k, {})
                if not r or not p:
                    missing.append("%s %s %dx%d (%s)" % (op, s["dtype"], s["m"], s["n"],
                                                         "ours" if not r else "peer"))
                    continue
                cnt += 1
                eager = p.get("eager") or p.get("autograd")
                comp = p.get("compile")
                best = min(q["median_ms"] for q in (eager, comp) if q)
                if eager:
                    xe.append(eager["median_ms"] / r["median_ms"])
                if comp:
                    xc.append(comp["median_ms"] / r["median_ms"])
                nbytes = s["m"] * s["n"] * ES[s["dtype"]]
                cp = peer.get(("copy_at_shape", s["dtype"], (s["m"], s["n"])), {}).get("torch")
                if op.endswith("_fwd") and cp:
                    pct = 100.0 * cp["median_ms"] / r["median_ms"]
                else:
                    pct = 100.0 * r["GBps"] / copy
                if nbytes >= BIG:
                    pc.append(pct)
                worst.append((best / r["median_ms"], op, s, r["median_ms"], eager, comp, pct))
            if cnt:
                lines.append("| %s | %s | %d | %s | %s | %s |" % (
                    op, c, cnt, " / ".join(stats(xe)), " / ".join(stats(xc)),
                    " / ".join(stats(pc))))
    lines += ["", "Targets (issue #16): forwards >= 1.0x eager and >= 0.95x compile on every "
              "shape, >= 90% of copy at 64 MiB and more; backwards >= 1.2x the peer, >= 80% of "
              "copy at 64 MiB and more.", ""]
    miss_fwd = [w for w in worst if w[1].endswith("_fwd") and (
        (w[4] and w[4]["median_ms"] / w[3] < 1.0) or (w[5] and w[5]["median_ms"] / w[3] < 0.95))]
    miss_bwd = [w for w in worst if w[1].endswith("_bwd") and w[4] and w[4]["median_ms"] / w[3] < 1.2]
    lines.append("Shapes below the speed target: %d of %d forward cases, %d of %d backward cases."
                 % (len(miss_fwd), sum(w[1].endswith("_fwd") for w in worst),
                    len(miss_bwd), sum(w[1].endswith("_bwd") for w in worst)))
    lines += ["", "Ten worst cases (ours against the faster peer):", "",
              "| op | dtype | shape | class | ours ms | eager ms | compile ms | best peer / ours | % copy |",
              "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for ratio, op, s, ms, eager, comp, pct in sorted(worst, key=lambda w: w[0])[:10]:
        f = lambda q: "%.4f" % q["median_ms"] if q else "-"
        lines.append("| %s | %s | %dx%d | %s | %.4f | %s | %s | %.2fx | %.0f |" % (
            op, s["dtype"], s["m"], s["n"], s["class"], ms, f(eager), f(comp), ratio, pct))
    if missing:
        lines += ["", "Not measured on one side (%d): %s" % (len(missing), ", ".join(missing))]
    return "\n".join(lines)


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "gen":
        fam = flag("--family")
        assert fam in OPS, "--family takes norm or softmax"
        doc = gen(fam, int(flag("--seed", "1")), int(flag("--count", "200")))
        json.dump(doc, sys.stdout, indent=0)
        print()
    elif cmd == "precompile":
        precompile(json.load(open(sys.argv[2])), int(flag("--part")), int(flag("--of")))
    elif cmd == "peers":
        peers(json.load(open(sys.argv[2])), int(flag("--workers", "1")))
    elif cmd == "report":
        doc = json.load(open(sys.argv[2]))
        ours = json.load(open(sys.argv[3]))["rows"]
        prs = json.load(open(sys.argv[4]))["rows"]
        print(report(doc, ours, prs))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
