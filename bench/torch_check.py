#!/usr/bin/env python3
"""Cross-check of fly-norm against torch, on the same inputs.

Reads DIR/manifest.json written by `fly-norm/examples/torch_check.rs` (our kernels' inputs and
outputs as raw little-endian files), computes torch's result for every case on the same
inputs and compares it with ours within the case's tolerances (those of the CPU-reference
tests, from shared/facts/kernels.md). The torch reference is computed in float32 from the
already-cast inputs, as kernels.md defines it: the inputs are upcast to f32, F.layer_norm /
F.rms_norm run in f32 (never torch's own bf16/f16 kernels, whose internal rounding differs),
the fused add is `x + residual` rounded to the activation dtype, the int8 quant is written
out in torch (`yscale = rowmax|y * xscale| / 127`, 0 -> 1, `q = trunc(y' / yscale)` clamped to
[-127, 127], from the unrounded f32 y), and backward gradients come from torch.autograd.grad
in f32 (RMSNorm's fused-add backward: the gradient of the normalised sum plus the gradient
arriving at `residual_out`).

An element passes if |ours - ref| <= atol + rtol * |ref|, or if ours equals ref rounded to
the output's dtype (a correctly rounded result, which for large bf16 values can be more than
atol away from the unrounded reference); NaN only matches NaN. Prints one line per case (the
worst output's max abs error and max error relative to max |ref|, and every output's), a
summary line `torch_check: N cases, P passed, F failed`, and exits 1 if any case fails.

Usage: python3 torch_check.py DIR [--cpu] [--load-only]
  --cpu        compute the torch reference on the CPU even where CUDA is available
  --load-only  no torch: parse the manifest and load and size-check every file (with numpy),
               a self-check of the harness on a machine without torch
"""
import json
import math
import os
import sys

ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i8": 1}


def read_raw(root, t):
    """The raw bytes of tensor entry `t`, checked against its dtype and shape."""
    path = os.path.join(root, t["file"])
    with open(path, "rb") as f:
        data = f.read()
    want = math.prod(t["shape"]) * ELEM_BYTES[t["dtype"]]
    if len(data) != want:
        raise ValueError(f"{t['file']}: {len(data)} bytes, expected {want} for "
                         f"{t['dtype']} {t['shape']}")
    return data


def load_numpy(root, t):
    """Tensor entry `t` as a numpy array: float64 for floats (exact), int64 for i8."""
    import numpy as np
    data = read_raw(root, t)
    dt = t["dtype"]
    if dt == "bf16":
        a = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view("<f4")
    elif dt == "i8":
        return np.frombuffer(data, dtype="i1").astype(np.int64).reshape(t["shape"])
    else:
        a = np.frombuffer(data, dtype={"f32": "<f4", "f16": "<f2"}[dt])
    return a.astype(np.float64).reshape(t["shape"])


def load_only(root, manifest):
    """Parse every case and load every file with numpy; returns the number of problems."""
    bad = 0
    fields = ["name", "op", "dir", "norm", "dtype", "wdtype", "m", "n", "eps", "inputs",
              "outputs", "error"]
    for c in manifest["cases"]:
        try:
            for k in fields:
                if k not in c:
                    raise KeyError(f"missing field {k}")
            if c["error"] is not None:
                raise RuntimeError(f"our call failed: {c['error']}")
            for name, t in list(c["inputs"].items()) + list(c["outputs"].items()):
                a = load_numpy(root, t)
                if list(a.shape) != t["shape"]:
                    raise ValueError(f"{name}: shape {a.shape}")
            for name, t in c["outputs"].items():
                if not ("atol" in t and "rtol" in t):
                    raise KeyError(f"{name}: no tolerance")
            print(f"ok    {c['name']}: {len(c['inputs'])} inputs, {len(c['outputs'])} outputs")
        except Exception as e:  # noqa: BLE001 - report every case
            bad += 1
            print(f"FAIL  {c.get('name', '?')}: {e}")
    return bad


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    unknown = flags - {"--cpu", "--load-only"}
    if len(args) != 1 or unknown:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    root = args[0]
    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)
    cases = manifest["cases"]
    print(f"torch_check: {len(cases)} cases from {manifest['device']} "
          f"({manifest['backend']}, {manifest['target']})")
    if not cases:
        print("torch_check: the manifest has no cases")
        return 1
    if "--load-only" in flags:
        bad = load_only(root, manifest)
        print(f"torch_check (load only): {len(cases)} cases, {len(cases) - bad} passed, "
              f"{bad} failed")
        return 1 if bad else 0
    return Checker(root, "--cpu" in flags).run(cases)


class Checker:
    """Computes torch's results and compares them with ours."""

    def __init__(self, root, cpu):
        import torch
        import torch.nn.functional as F
        self.torch, self.F, self.root = torch, F, root
        self.dev = "cuda" if torch.cuda.is_available() and not cpu else "cpu"
        self.dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                   "i8": torch.int8}
        if self.dev == "cuda":
            # No TF32 anywhere (the norms use none, but be explicit about f32 numerics).
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        print(f"torch_check: torch {torch.__version__} on {self.dev}"
              + (f" ({torch.cuda.get_device_name()})" if self.dev == "cuda" else ""))

    def load(self, t):
        """Tensor entry `t` on the reference device: f32 (exact widening) or int8 as int32."""
        torch = self.torch
        data = bytearray(read_raw(self.root, t))
        a = torch.frombuffer(data, dtype=self.dt[t["dtype"]]).reshape(t["shape"])
        a = a.to(torch.int32) if t["dtype"] == "i8" else a.to(torch.float32)
        return a.to(self.dev)

    def rms_norm(self, x, w, eps):
        F = self.F
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, eps)
        # torch < 2.4: the same formula by hand, in f32.
        return x * self.torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def norm(self, c, x, g, b):
        if c["norm"] == "layernorm":
            return self.F.layer_norm(x, (x.shape[-1],), g, b, c["eps"])
        return self.rms_norm(x, g, c["eps"])

    def fused_input(self, c, x, r):
        """`x + residual` in f32, rounded to the activation dtype (exact in f32 again)."""
        return (x + r).to(self.dt[c["dtype"]]).to(self.torch.float32)

    def reference(self, c, inp):
        """torch's value of every output of case `c`, as f32 (q as int32)."""
        torch = self.torch
        x, g = inp["x"], inp["gamma"]
        b = inp.get("beta") if c["beta"] else None
        if c["residual"]:
            x = self.fused_input(c, x, inp["residual"])
        ref = {}
        if c["dir"] == "fwd":
            if c["residual"]:
                ref["residual_out"] = x
            y = self.norm(c, x, g, b)
            if c["quant"] == "none":
                ref["y"] = y
            else:
                ys = y * inp["xscale"] if c["quant"] == "smooth" else y
                amax = ys.abs().amax(dim=-1)
                scale = torch.where(amax == 0, torch.ones_like(amax), amax / 127.0)
                q = torch.trunc(ys / scale[:, None]).clamp(-127, 127)
                ref["q"] = torch.nan_to_num(q, nan=0.0).to(torch.int32)
                ref["yscale"] = scale
            if c["stats"]:
                if c["norm"] == "layernorm":
                    mean = x.mean(dim=-1)
                    ref["mean"] = mean
                    ms = (x - mean[:, None]).pow(2).mean(dim=-1)  # biased variance
                else:
                    ms = x.pow(2).mean(dim=-1)  # mean square
                ref["rstd"] = torch.rsqrt(ms + c["eps"])
            return ref
        # Backward: autograd of the f32 forward on the same inputs, seeded with dy.
        x = x.detach().clone().requires_grad_(True)
        g = g.detach().clone().requires_grad_(True)
        leaves = [x, g]
        if b is not None:
            b = b.detach().clone().requires_grad_(True)
            leaves.append(b)
        y = self.norm(c, x, g, b)
        grads = torch.autograd.grad(y, leaves, inp["dy"])
        ref["dx"] = grads[0]
        if c["dresidual"]:
            # y = norm(r), r = x + residual is also returned (residual_out): the gradient
            # arriving there adds to both x's and residual's gradient.
            ref["dx"] = grads[0] + inp["dresidual"]
        ref["dgamma"] = grads[1]
        if b is not None:
            ref["dbeta"] = grads[2]
        return ref

    def compare(self, t, got, want):
        """(ok, max abs error, max error / max |ref|, bad element count)."""
        torch = self.torch
        if t["dtype"] == "i8":
            err = (got - want).abs().to(torch.float64)
            ok = err <= t["atol"]
            scale = want.abs().max().item() if want.numel() else 0
        else:
            got64, want64 = got.to(torch.float64), want.to(torch.float64)
            err = (got64 - want64).abs()
            both_nan = got64.isnan() & want64.isnan()
            err = torch.where(both_nan, torch.zeros_like(err), err)
            err = torch.where(err.isnan(), torch.full_like(err, math.inf), err)
            rounded = want.to(self.dt[t["dtype"]]).to(torch.float64)
            ok = (err <= t["atol"] + t["rtol"] * want64.abs()) | (got64 == rounded) | both_nan
            finite = want64[want64.isfinite()]
            scale = finite.abs().max().item() if finite.numel() else 0
        max_abs = err.max().item() if err.numel() else 0.0
        rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
        bad = int((~ok).sum().item())
        return bad == 0, max_abs, rel, bad

    def case(self, c):
        """Check one case; returns (ok, the printed line)."""
        head = f"{c['name']} [{c.get('path', '?')}]"
        if c["error"] is not None:
            return False, f"FAIL  {head}: our call failed: {c['error']}"
        inp = {k: self.load(t) for k, t in c["inputs"].items()}
        ref = self.reference(c, inp)
        parts, ok_all, worst = [], True, (-1.0, 0.0, 0.0)
        for name, t in c["outputs"].items():
            if name not in ref:
                return False, f"FAIL  {head}: no torch reference for output {name}"
            got = self.load(t)
            want = ref[name].detach()
            if list(want.shape) != list(got.shape):
                return False, f"FAIL  {head}: {name}: torch shape {list(want.shape)}"
            ok, max_abs, rel, bad = self.compare(t, got, want)
            ok_all &= ok
            allowed = t["atol"] + t["rtol"] * want.abs().max().item()
            margin = max_abs / allowed if allowed > 0 else (0.0 if max_abs == 0 else math.inf)
            if margin > worst[0]:
                worst = (margin, max_abs, rel)
            parts.append(f"{name} {max_abs:.1e}/{rel:.1e}" + ("" if ok else f" ({bad} bad)"))
        status = "PASS" if ok_all else "FAIL"
        return ok_all, (f"{status}  {head}: max abs {worst[1]:.2e} max rel {worst[2]:.2e} | "
                        + ", ".join(parts))

    def run(self, cases):
        failed = 0
        for c in cases:
            try:
                ok, line = self.case(c)
            except Exception as e:  # noqa: BLE001 - one broken case must not hide the rest
                ok, line = False, f"FAIL  {c.get('name', '?')}: {type(e).__name__}: {e}"
            failed += not ok
            print(line)
        print("torch_check: per output `abs/rel`: max |ours - torch| and that over max |torch|")
        print(f"torch_check: {len(cases)} cases, {len(cases) - failed} passed, {failed} failed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
