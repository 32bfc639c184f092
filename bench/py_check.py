#!/usr/bin/env python3
"""The flydsl Python package against torch on the GPU, in one process, on the same tensors.

Needs torch with CUDA and the flydsl wheel on the path (installs nothing):

    pip install --no-deps --target /tmp/site flydsl-*.whl
    PYTHONPATH=/tmp/site python3 bench/py_check.py [--quick] [--seed N]

Checks, each PASS/FAIL in the summary table:
- every exposed family (RMSNorm and LayerNorm forward with residual / stats / int8 quant and
  backward, softmax forward and backward, GEMM bf16/f16 with every epilogue and preshuffled
  B, 8-bit scaled GEMM (fp8 e4m3fn, int8), FlashAttention dense / GQA / causal / LSE /
  split-K / Hopper kernel / varlen / fp8) on fresh random inputs against torch's float32
  result on the same inputs, with the tolerances of shared/facts/kernels.md (an element
  passes if |ours - ref| <= atol + rtol |ref| + u |ref|, u the output dtype's unit roundoff:
  ours is rounded to its dtype, the reference is not);
- ordering with other work on torch's current stream, without synchronizing: a sleep kernel,
  then a torch op writes our input, then our call, then a torch op reads our output; on the
  default stream, on a side stream (torch.cuda.Stream, non-blocking) and with stream=;
- the clear errors: non-contiguous, misaligned, CPU and wrong-dtype inputs raise ValueError /
  TypeError naming the function, the argument and the fix, and leave out= untouched;
- per-call host overhead (a measurement, not a check): median host time of one call of ours
  vs torch.add / torch.softmax on tiny tensors (outputs preallocated, and with allocation).

Prints a summary table and exits 1 if any check fails. Under a minute on an H200.
"""
import argparse
import math
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

import flydsl

DEV = "cuda"
RESULTS = []  # (name, ok, detail)
U = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def record(name, ok, detail):
    RESULTS.append((name, bool(ok), detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)


def check(name, fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - one failure must not hide the rest
        record(name, False, f"{type(e).__name__}: {e}")
        traceback.print_exc()


def compare(name, ours, ref, atol, rtol=0.0, out_dtype=None):
    """|ours - ref| <= atol + (rtol + u) |ref| elementwise (NaN only matches NaN); atol is a
    number or a tensor like ref."""
    o, r = ours.detach().double(), ref.detach().double()
    if o.shape != r.shape:
        record(name, False, f"shape {tuple(o.shape)} vs torch {tuple(r.shape)}")
        return False
    u = U.get(out_dtype if out_dtype is not None else ours.dtype, 0.0)
    both_nan = o.isnan() & r.isnan()
    err = torch.where(both_nan, torch.zeros_like(o), (o - r).abs())
    err = torch.nan_to_num(err, nan=math.inf)
    allowed = atol + (rtol + u) * r.abs()
    bad = int((err > allowed).sum())
    finite = r[r.isfinite()]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    mx = err.max().item() if err.numel() else 0.0
    atol_max = atol.max().item() if torch.is_tensor(atol) else atol
    record(name, bad == 0, f"max abs err {mx:.2e} (max |ref| {scale:.2e}, atol {atol_max:g}, "
           f"rtol {rtol:g})" + (f", {bad} bad of {err.numel()}" if bad else ""))
    return bad == 0


def rand(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, device=DEV) * scale).to(dtype)


# ---- norms ----

NORM_TOL = {  # fwd atol; dx atol; dw rtol, atol (kernels.md)
    torch.float32: (1e-4, 1e-3, 1e-4, 1e-2),
    torch.float16: (1e-2, 3e-2, 3e-2, 1e-1),
    torch.bfloat16: (2e-2, 2e-1, 1e-1, 5e-1),
}
MIXED_TOL = {torch.float16: (3e-2, 3e-2), torch.bfloat16: (2e-1, 1e-1)}  # f32 weights


def ref_quant(y, xscale):
    ys = y * xscale if xscale is not None else y
    amax = ys.abs().amax(dim=-1)
    scale = torch.where(amax == 0, torch.ones_like(amax), amax / 127.0)
    q = torch.trunc(ys / scale[..., None]).clamp(-127, 127)
    return q, scale


def norms(shapes):
    eps = 1e-5
    for (m, n) in shapes:
        for dt, wdt in [(torch.float32, torch.float32), (torch.float16, torch.float16),
                        (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32)]:
            tag = f"{NAME[dt]}{'' if wdt == dt else '/w' + NAME[wdt]} [{m}, {n}]"
            fa, dxa, dwr, dwa = NORM_TOL[dt]
            fr = 0.0
            if wdt != dt:
                fa, fr = MIXED_TOL[dt]
                dxa, dwr, dwa = fa, 5e-3, 5e-2
            x, res, dy = rand(m, n, dtype=dt), rand(m, n, dtype=dt), rand(m, n, dtype=dt)
            w = torch.rand(n, device=DEV).to(wdt)
            xf, wf = x.float(), w.float()

            def rms_plain():
                y = flydsl.rms_norm(x, w, eps)
                compare(f"rms_norm {tag}", y, F.rms_norm(xf, (n,), wf, eps), fa, fr)
            check(f"rms_norm {tag}", rms_plain)

            def rms_add():
                y, ro, rstd = flydsl.rms_norm(x, w, eps, residual=res, return_rstd=True)
                r = (xf + res.float()).to(dt).float()
                compare(f"rms_norm residual {tag}: y", y, F.rms_norm(r, (n,), wf, eps), fa, fr)
                compare(f"rms_norm residual {tag}: residual_out", ro, r, 0.0)
                compare(f"rms_norm residual {tag}: rstd", rstd,
                        torch.rsqrt(r.pow(2).mean(-1) + eps), 1e-4, 1e-4)
            check(f"rms_norm residual {tag}", rms_add)

            def rms_quant():
                xs = torch.rand(n, device=DEV) + 0.5
                for smooth in (None, xs):
                    q, ys = flydsl.rms_norm_quant(x, w, eps, xscale=smooth)
                    rq, rs = ref_quant(F.rms_norm(xf, (n,), wf, eps), smooth)
                    kind = "smooth" if smooth is not None else "dynamic"
                    compare(f"rms_norm_quant {kind} {tag}: q", q.float(), rq, 1.0)
                    compare(f"rms_norm_quant {kind} {tag}: yscale", ys, rs, 1e-3)
            if wdt == dt:
                check(f"rms_norm_quant {tag}", rms_quant)

            def rms_bwd():
                r = (xf + res.float()).to(dt)
                _, rstd = flydsl.rms_norm(r, w, eps, return_rstd=True)
                dres = rand(m, n, dtype=dt)
                for strategy in ("atomic", "two_stage"):
                    dx, dw = flydsl.rms_norm_backward(dy, r, w, rstd, dresidual=dres,
                                                      strategy=strategy)
                    rl = r.float().requires_grad_(True)
                    wl = wf.clone().requires_grad_(True)
                    gx, gw = torch.autograd.grad(F.rms_norm(rl, (n,), wl, eps), [rl, wl],
                                                 dy.float())
                    t = f"rms_norm_backward {strategy} {tag}"
                    compare(f"{t}: dx", dx, gx + dres.float(), dxa, fr)
                    compare(f"{t}: dweight", dw, gw, dwa, dwr)
            check(f"rms_norm_backward {tag}", rms_bwd)

            if wdt != dt:
                continue
            b = torch.rand(n, device=DEV).to(dt)

            def ln():
                y, ro, mean, rstd = flydsl.layer_norm(x, w, b, eps, residual=res,
                                                      return_stats=True)
                r = (xf + res.float()).to(dt).float()
                compare(f"layer_norm {tag}: y", y, F.layer_norm(r, (n,), wf, b.float(), eps),
                        fa)
                compare(f"layer_norm {tag}: residual_out", ro, r, 0.0)
                compare(f"layer_norm {tag}: mean", mean, r.mean(-1), 1e-4, 1e-4)
                var = (r - r.mean(-1, keepdim=True)).pow(2).mean(-1)
                compare(f"layer_norm {tag}: rstd", rstd, torch.rsqrt(var + eps), 1e-4, 1e-4)
                q, ys = flydsl.layer_norm_quant(x, w, b, eps)
                rq, rs = ref_quant(F.layer_norm(xf, (n,), wf, b.float(), eps), None)
                compare(f"layer_norm_quant {tag}: q", q.float(), rq, 1.0)
                compare(f"layer_norm_quant {tag}: yscale", ys, rs, 1e-3)
            check(f"layer_norm {tag}", ln)

            def ln_bwd():
                _, mean, rstd = flydsl.layer_norm(x, w, b, eps, return_stats=True)
                dx, dw, db = flydsl.layer_norm_backward(dy, x, w, mean, rstd)
                xl = xf.clone().requires_grad_(True)
                wl = wf.clone().requires_grad_(True)
                bl = b.float().requires_grad_(True)
                gx, gw, gb = torch.autograd.grad(F.layer_norm(xl, (n,), wl, bl, eps),
                                                 [xl, wl, bl], dy.float())
                compare(f"layer_norm_backward {tag}: dx", dx, gx, dxa)
                compare(f"layer_norm_backward {tag}: dweight", dw, gw, dwa, dwr)
                compare(f"layer_norm_backward {tag}: dbias", db, gb, dwa, dwr)
            check(f"layer_norm_backward {tag}", ln_bwd)


# ---- softmax ----

SM_TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 2e-3),
          torch.bfloat16: (2e-2, 1e-2)}  # fwd max abs; bwd max err / max |ref|


def softmaxes(shapes):
    for (m, n) in shapes:
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            tag = f"{NAME[dt]} [{m}, {n}]"
            fa, br = SM_TOL[dt]

            def run():
                x = rand(m, n, dtype=dt, scale=3.0)
                y = flydsl.softmax(x)
                compare(f"softmax {tag}", y, torch.softmax(x.float(), -1), fa)
                dy = rand(m, n, dtype=dt)
                dx = flydsl.softmax_backward(y, dy)
                yf = y.float()
                ref = yf * (dy.float() - (dy.float() * yf).sum(-1, keepdim=True))
                compare(f"softmax_backward {tag}", dx, ref, br * ref.abs().max().item())
            check(f"softmax {tag}", run)


# ---- GEMM ----

ACTS = {None: lambda v: v, "relu": F.relu, "silu": F.silu,
        "gelu": lambda v: F.gelu(v, approximate="tanh")}


def gemm_tol(ref, k, dt):
    """f32 accumulation of k products plus the output rounding: atol grows with sqrt(k)."""
    return 2.0 ** -20 * math.sqrt(k) * ref.abs().max().item() + 1e-3


def gemms(shapes):
    for (m, n, k) in shapes:
        for dt in (torch.bfloat16, torch.float16):
            a, b = rand(m, k, dtype=dt), rand(n, k, dtype=dt, scale=0.5)
            bias = rand(n, dtype=dt)
            base = a.float() @ b.float().T
            for act in ACTS:
                tag = f"{NAME[dt]} [{m}x{n}x{k}] bias{'+' + act if act else ''}"

                def run():
                    out = flydsl.gemm(a, b, bias, activation=act)
                    ref = ACTS[act](base + bias.float())
                    compare(f"gemm {tag}", out, ref, gemm_tol(ref, k, dt), 2.0 ** -12)
                check(f"gemm {tag}", run)

            def plain():
                out = flydsl.gemm(a, b)
                compare(f"gemm {NAME[dt]} [{m}x{n}x{k}]", out, base, gemm_tol(base, k, dt))
            check(f"gemm {NAME[dt]} [{m}x{n}x{k}]", plain)
            if n % 16 == 0 and (k * 2) % 64 == 0:
                def pre():
                    bs = flydsl.preshuffle_b(b)
                    if n * k <= 1 << 16:  # the torch layout byte for byte against Rust's
                        cpu = b.cpu().contiguous().view(torch.uint8).flatten()
                        want = flydsl._flydsl.preshuffle_b_bytes(bytes(cpu.tolist()), n, k, 2)
                        got = bytes(bs.cpu().contiguous().view(torch.uint8).flatten()
                                    .tolist())
                        record(f"preshuffle_b {NAME[dt]} [{n}x{k}] == fly_gemm::preshuffle_b",
                               got == want, f"{len(got)} bytes")
                    out = flydsl.gemm(a, bs, b_preshuffled=True)
                    compare(f"gemm preshuffled {NAME[dt]} [{m}x{n}x{k}]", out, base,
                            gemm_tol(base, k, dt))
                check(f"gemm preshuffled {NAME[dt]} [{m}x{n}x{k}]", pre)


def quantize(x, kind):
    amax = x.abs().amax(dim=-1).clamp(min=1e-30)
    qmax = 448.0 if kind == "fp8" else 127.0
    scale = amax / qmax
    v = x / scale[:, None]
    q = v.to(torch.float8_e4m3fn) if kind == "fp8" else v.round().clamp(-127, 127).to(
        torch.int8)
    return q, scale.float()


def scaled_gemms(shapes):
    for (m, n, k) in shapes:
        for kind in ("fp8", "int8"):
            for od in (torch.bfloat16, torch.float16):
                tag = f"{kind}->{NAME[od]} [{m}x{n}x{k}]"

                def run():
                    aq, sa = quantize(torch.randn(m, k, device=DEV), kind)
                    bq, sb = quantize(torch.randn(n, k, device=DEV), kind)
                    bias = rand(n, dtype=od)
                    out = flydsl.gemm_scaled(aq, bq, sa, sb, bias, activation="relu",
                                             out_dtype=od)
                    ref = F.relu((aq.float() @ bq.float().T) * sa[:, None] * sb[None, :]
                                 + bias.float())
                    tol = gemm_tol(ref, k, od)
                    if kind == "fp8":
                        # Hopper's fp8 wgmma keeps 13 mantissa bits of each 128-wide K
                        # stage's sum (fly-gemm's kernels/wgmma_scaled.rs; cuBLAS's
                        # _scaled_mm has the same error): 2^-8 of sum |a b| (scaled).
                        mag = (aq.float().abs() @ bq.float().abs().T) * sa[:, None] * sb[None, :]
                        tol = tol + 2.0 ** -8 * mag
                    compare(f"gemm_scaled {tag}", out, ref, tol, 2.0 ** -12)
                    if n % 16 == 0 and k % 64 == 0:
                        out2 = flydsl.gemm_scaled(aq, flydsl.preshuffle_b(bq), sa, sb, bias,
                                                  activation="relu", out_dtype=od,
                                                  b_preshuffled=True)
                        compare(f"gemm_scaled preshuffled {tag}", out2, ref,
                                gemm_tol(ref, k, od), 2.0 ** -12)
                check(f"gemm_scaled {tag}", run)


# ---- attention ----


def attn_ref(q, k, v, causal, scale, cu_q=None, cu_k=None):
    """f32 attention with the bottom-right causal mask; out like q, LSE (natural log)."""
    if cu_q is not None:
        outs, lses = [], []
        for i in range(len(cu_q) - 1):
            qs, ks = q[cu_q[i]:cu_q[i + 1]][None], k[cu_k[i]:cu_k[i + 1]][None]
            vs = v[cu_k[i]:cu_k[i + 1]][None]
            o, l = attn_ref(qs, ks, vs, causal, scale)
            outs.append(o[0])
            lses.append(l[0])
        return torch.cat(outs, 0), torch.cat(lses, 1)
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))  # B H S D
    g = qf.shape[1] // kf.shape[1]
    kf, vf = kf.repeat_interleave(g, 1), vf.repeat_interleave(g, 1)
    s = (qf @ kf.transpose(-1, -2)) * scale
    sq, skv = s.shape[-2], s.shape[-1]
    if causal:
        i = torch.arange(sq, device=DEV)[:, None]
        j = torch.arange(skv, device=DEV)[None, :]
        s = s.masked_fill(j > i + skv - sq, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2), lse


def attn_compare(name, out, lse, ref_out, ref_lse, dt, fp8=False):
    atol = 5e-2 if fp8 else 1e-2
    ok = compare(f"{name}: out", out, ref_out, atol)
    o = out.float().reshape(-1, out.shape[-1])
    r = ref_out.float().reshape(-1, out.shape[-1])
    nz = r.norm(dim=-1) > 0
    cos = F.cosine_similarity(o[nz], r[nz], dim=-1).min().item() if nz.any() else 1.0
    need = 0.98 if fp8 else 0.99
    record(f"{name}: min row cosine", cos > need, f"{cos:.5f} (> {need})")
    if lse is not None:
        la = {torch.bfloat16: 8e-3, torch.float16: 4e-3}[dt]
        ok &= compare(f"{name}: lse", lse, ref_lse, la)
    return ok


def attentions(quick):
    cases = [  # batch, sq, skv, hq, hkv, d, causal, splits, kernel
        (2, 128, 128, 8, 8, 64, False, None, "auto"),
        (1, 100, 130, 8, 2, 96, True, None, "auto"),
        (2, 64, 300, 4, 1, 128, False, 3, "portable"),
        (1, 200, 200, 4, 4, 128, True, None, "hopper"),
        (1, 77, 77, 2, 2, 256, False, None, "hopper"),
    ]
    if quick:
        cases = cases[:2]
    for (bsz, sq, skv, hq, hkv, d, causal, splits, kernel) in cases:
        for dt in (torch.bfloat16, torch.float16):
            tag = (f"{NAME[dt]} B{bsz} Sq{sq} Skv{skv} H{hq}/{hkv} D{d}"
                   f"{' causal' if causal else ''}{f' splits={splits}' if splits else ''}"
                   f" {kernel}")

            def run():
                q = rand(bsz, sq, hq, d, dtype=dt)
                k, v = rand(bsz, skv, hkv, d, dtype=dt), rand(bsz, skv, hkv, d, dtype=dt)
                out, lse = flydsl.flash_attn(q, k, v, causal=causal, return_lse=True,
                                             num_kv_splits=splits, kernel=kernel)
                ro, rl = attn_ref(q, k, v, causal, 1.0 / math.sqrt(d))
                attn_compare(f"flash_attn {tag}", out, lse, ro, rl, dt)
            check(f"flash_attn {tag}", run)

    lens_q, lens_k = [37, 0, 128, 5], [50, 17, 128, 64]
    cu_q = [0]
    cu_k = [0]
    for a, b in zip(lens_q, lens_k):
        cu_q.append(cu_q[-1] + a)
        cu_k.append(cu_k[-1] + b)
    for dt in (torch.bfloat16, torch.float16):
        for causal in (False, True):
            tag = f"{NAME[dt]} lens {lens_q}/{lens_k}{' causal' if causal else ''}"

            def run():
                q = rand(cu_q[-1], 4, 64, dtype=dt)
                k, v = rand(cu_k[-1], 2, 64, dtype=dt), rand(cu_k[-1], 2, 64, dtype=dt)
                cuq_dev = torch.tensor(cu_q, dtype=torch.int32, device=DEV)
                out, lse = flydsl.flash_attn_varlen(q, k, v, cuq_dev, cu_k, max(lens_q),
                                                    max(lens_k), causal=causal,
                                                    return_lse=True)
                ro, rl = attn_ref(q, k, v, causal, 0.125, cu_q, cu_k)
                attn_compare(f"flash_attn_varlen {tag}", out, lse, ro, rl, dt)
            check(f"flash_attn_varlen {tag}", run)

    def fp8(varlen):
        d = 128
        if varlen:
            q = torch.randn(cu_q[-1], 4, d, device=DEV)
            k, v = (torch.randn(cu_k[-1], 2, d, device=DEV) for _ in range(2))
        else:
            q = torch.randn(2, 96, 4, d, device=DEV)
            k, v = (torch.randn(2, 160, 2, d, device=DEV) for _ in range(2))
        ds = [t.abs().amax() / 448.0 for t in (q, k, v)]
        q8, k8, v8 = ((t / s).to(torch.float8_e4m3fn) for t, s in zip((q, k, v), ds))
        dq, dk, dv = (s.reshape(1).float() for s in ds)
        deq = [t.float() * s for t, s in zip((q8, k8, v8), ds)]
        if varlen:
            out = flydsl.flash_attn_varlen_fp8(q8, k8, v8, cu_q, cu_k, max(lens_q),
                                               max(lens_k), dq, dk, dv, causal=True)
            ro, _ = attn_ref(*deq, True, 1.0 / math.sqrt(d), cu_q, cu_k)
        else:
            out = flydsl.flash_attn_fp8(q8, k8, v8, dq, dk, dv, causal=True)
            ro, _ = attn_ref(*deq, True, 1.0 / math.sqrt(d))
        if out.dtype != torch.bfloat16:
            raise AssertionError(f"fp8 attention wrote {out.dtype}, not bfloat16")
        attn_compare(f"flash_attn{'_varlen' if varlen else ''}_fp8 causal", out, None, ro,
                     None, torch.bfloat16, fp8=True)
    check("flash_attn_fp8", lambda: fp8(False))
    check("flash_attn_varlen_fp8", lambda: fp8(True))


# ---- ordering with torch's work on the stream ----


def ordering():
    """A sleep kernel, then torch writes our input, we run, torch reads our output: no host
    sync in between. On the wrong stream we would read the old input or torch the NaNs."""
    n = 4096
    w = torch.rand(n, device=DEV)
    a = rand(512, 1024, dtype=torch.bfloat16)
    b = rand(1024, 1024, dtype=torch.bfloat16)

    def families():
        yield "rms_norm", lambda x, out, s: flydsl.rms_norm(x, w, out=out, stream=s), \
            lambda x: F.rms_norm(x.float(), (n,), w, 1e-5), (256, n), 2e-2
        yield "softmax", lambda x, out, s: flydsl.softmax(x, out=out, stream=s), \
            lambda x: torch.softmax(x.float(), -1), (256, n), 2e-2
        yield "gemm", lambda x, out, s: flydsl.gemm(x, b, out=out, stream=s), \
            lambda x: x.float() @ b.float().T, (512, 1024), 0.5

    def attn_fn(x, out, s):
        return flydsl.flash_attn(x, x, x, out=out, stream=s)

    def attn_ref_fn(x):
        return attn_ref(x, x, x, False, 1.0 / 8.0)[0]

    fams = list(families()) + [("flash_attn", attn_fn, attn_ref_fn, (2, 256, 4, 64), 2e-2)]
    side = torch.cuda.Stream()

    def fresh(name, shape):
        src = rand(*shape, dtype=torch.bfloat16)
        x = torch.zeros(shape, dtype=torch.bfloat16, device=DEV)
        out_shape = shape if name != "gemm" else (shape[0], b.shape[0])
        out = torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device=DEV)
        torch.cuda.synchronize()
        return src, x, out

    for where in ("default stream", "side stream", "stream= argument"):
        for name, ours, ref, shape, atol in fams:
            def run():
                src, x, out = fresh(name, shape)
                if where == "stream= argument":
                    # torch's work on `side`; our call told so while the current stream is
                    # the default one.
                    with torch.cuda.stream(side):
                        torch.cuda._sleep(50_000_000)  # ~25 ms of GPU time first
                        x.copy_(src)  # torch writes our input
                    ours(x, out, side)
                    with torch.cuda.stream(side):
                        seen = out.float() * 1.0  # torch reads our output
                else:
                    s = side if where == "side stream" else torch.cuda.current_stream()
                    with torch.cuda.stream(s):
                        torch.cuda._sleep(50_000_000)
                        x.copy_(src)
                        ours(x, out, None)
                        seen = out.float() * 1.0
                torch.cuda.synchronize()
                compare(f"ordering {where}: {name}", seen, ref(src), atol, 2.0 ** -8,
                        out_dtype=torch.bfloat16)
            check(f"ordering {where}: {name}", run)


# ---- errors ----


def errors():
    x = rand(64, 256, dtype=torch.bfloat16)
    w = torch.ones(256, device=DEV, dtype=torch.bfloat16)

    def expect(name, exc, parts, fn, out=None):
        def run():
            before = out.clone() if out is not None else None
            try:
                fn()
            except exc as e:
                msg = str(e)
                missing = [p for p in parts if p not in msg]
                untouched = before is None or torch.equal(before.view(torch.uint8),
                                                          out.view(torch.uint8))
                record(f"error {name}", not missing and untouched,
                       f"{type(e).__name__}: {msg[:150]}"
                       + (f" (missing {missing})" if missing else "")
                       + ("" if untouched else " (out= was written)"))
                return
            except Exception as e:  # noqa: BLE001
                record(f"error {name}", False, f"raised {type(e).__name__}, not "
                       f"{exc.__name__}: {e}")
                return
            record(f"error {name}", False, "no exception")
        check(f"error {name}", run)

    y = torch.full_like(x, 3.0)
    expect("rms_norm transposed x", ValueError,
           ["flydsl.rms_norm", "`x`", "contiguous", "x.contiguous()"],
           lambda: flydsl.rms_norm(x.t(), torch.ones(64, device=DEV, dtype=torch.bfloat16),
                                   out=torch.empty(256, 64, device=DEV,
                                                   dtype=torch.bfloat16)))
    expect("rms_norm misaligned x", ValueError, ["`x`", "16 bytes", "x.clone()"],
           lambda: flydsl.rms_norm(x.view(-1)[1:257].view(1, 256), w, out=y[:1]), out=y)
    expect("rms_norm cpu weight", ValueError, ["`weight`", "cpu", "weight.cuda()"],
           lambda: flydsl.rms_norm(x, w.cpu(), out=y), out=y)
    expect("softmax int32", TypeError, ["flydsl.softmax", "`x`", "torch.int32", ".to("],
           lambda: flydsl.softmax(x.to(torch.int32)))
    expect("softmax in place", ValueError, ["`out`", "overlaps `x`"],
           lambda: flydsl.softmax(y, out=y), out=y)
    a = rand(32, 128, dtype=torch.bfloat16)
    b = rand(64, 128, dtype=torch.bfloat16)
    c = torch.full((32, 64), 5.0, device=DEV, dtype=torch.bfloat16)
    expect("gemm b.t()", ValueError, ["flydsl.gemm", "`b`", "contiguous", "b.contiguous()"],
           lambda: flydsl.gemm(a, b.t().contiguous().t(), out=c), out=c)
    expect("gemm relu without bias", ValueError, ["`activation`", "pass a bias"],
           lambda: flydsl.gemm(a, b, activation="relu", out=c), out=c)
    q = rand(1, 64, 4, 64, dtype=torch.bfloat16)
    o = torch.full_like(q, 2.0)
    expect("flash_attn transposed k", ValueError, ["flydsl.flash_attn", "`k`", "contiguous"],
           lambda: flydsl.flash_attn(q, q.transpose(1, 2).contiguous().transpose(1, 2), q,
                                     out=o), out=o)
    expect("flash_attn hopper D=96", ValueError, ["`head_dim` = 96"],
           lambda: flydsl.flash_attn(*(rand(1, 64, 2, 96, dtype=torch.bfloat16)
                                       for _ in range(3)), kernel="hopper"))


# ---- host overhead ----


def overhead(n_calls):
    """Median host time of one call (the GPU queue is drained every 100 calls, untimed)."""
    def median_us(fn):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        ts = []
        for i in range(n_calls):
            t0 = time.perf_counter_ns()
            fn()
            ts.append(time.perf_counter_ns() - t0)
            if i % 100 == 99:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        return statistics.median(ts) / 1e3

    x = torch.randn(4, 64, device=DEV, dtype=torch.bfloat16)
    x2, y = torch.randn_like(x), torch.empty_like(x)
    w = torch.ones(64, device=DEV, dtype=torch.bfloat16)
    a = torch.randn(16, 64, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(64, 64, device=DEV, dtype=torch.bfloat16)
    c = torch.empty(16, 64, device=DEV, dtype=torch.bfloat16)
    q = torch.randn(1, 16, 1, 64, device=DEV, dtype=torch.bfloat16)
    o = torch.empty_like(q)
    side = torch.cuda.Stream()
    rows = [
        ("torch.add(out=) [4x64]", lambda: torch.add(x, x2, out=y)),
        ("torch.softmax [4x64]", lambda: torch.softmax(x, -1)),
        ("F.rms_norm [4x64]", lambda: F.rms_norm(x, (64,), w, 1e-5)),
        ("flydsl.softmax(out=) [4x64]", lambda: flydsl.softmax(x, out=y)),
        ("flydsl.softmax [4x64] (allocates)", lambda: flydsl.softmax(x)),
        ("flydsl.rms_norm(out=) [4x64]", lambda: flydsl.rms_norm(x, w, out=y)),
        ("flydsl.gemm(out=) [16x64x64]", lambda: flydsl.gemm(a, b, out=c)),
        ("flydsl.flash_attn(out=) [1,16,1,64]", lambda: flydsl.flash_attn(q, q, q, out=o)),
        ("flydsl.softmax(out=, stream=side)", lambda: flydsl.softmax(x, out=y, stream=side)),
    ]
    base = None
    print(f"\nhost time per call, median of {n_calls} (us):")
    table = []
    for name, fn in rows:
        us = median_us(fn)
        base = us if base is None else base
        table.append((name, us, us / base))
        print(f"  {name:40s} {us:8.2f}  {us / base:5.2f}x torch.add", flush=True)
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("py_check: no CUDA device visible to torch")
        return 1
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    torch.manual_seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    info = flydsl.build_info()
    print(f"py_check: flydsl {info['version']} (targets {info['targets']}), torch "
          f"{torch.__version__}, {torch.cuda.get_device_name()}, python "
          f"{sys.version.split()[0]}, seed {seed}", flush=True)
    t0 = time.time()
    q = args.quick
    norms([(64, 1024), (8, 1021)] if q else [(64, 1024), (8, 1021), (512, 4096), (7, 16384)])
    softmaxes([(64, 1024), (5, 1000)] if q else [(64, 1024), (5, 1000), (32, 32768),
                                                 (3, 70000)])
    gemms([(64, 256, 128), (7, 64, 36)] if q else [(64, 256, 128), (7, 64, 36),
                                                   (300, 512, 1024), (1, 4096, 4096)])
    scaled_gemms([(64, 256, 128)] if q else [(64, 256, 128), (33, 96, 200),
                                             (256, 1024, 2048)])
    attentions(q)
    ordering()
    errors()
    table = overhead(500 if q else 3000)
    failed = [r for r in RESULTS if not r[1]]
    print(f"\n{'check':70s} result")
    for name, ok, detail in RESULTS:
        print(f"{name[:70]:70s} {'PASS' if ok else 'FAIL'}")
    print("\nhost overhead (median us per call):")
    for name, us, ratio in table:
        print(f"  {name:40s} {us:8.2f}  {ratio:5.2f}x")
    print(f"\npy_check: {len(RESULTS) - len(failed)} passed, {len(failed)} failed "
          f"({time.time() - t0:.0f} s, seed {seed})")
    for name, _, detail in failed:
        print(f"FAILED: {name}: {detail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
