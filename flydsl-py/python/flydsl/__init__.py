"""flydsl: the flydsl-rs GPU kernels on PyTorch tensors.

Norms (RMSNorm, LayerNorm: forward with residual add, statistics and int8 quant; backward),
row softmax (forward, backward), GEMM (bf16/f16 with fused bias + ReLU/SiLU/GELU; fp8/int8
with per-row and per-column scales; plain or preshuffled B) and FlashAttention forward
(dense BSHD, packed varlen, fp8 e4m3fn with descales). The kernels were compiled when the
wheel was built and are embedded in it: nothing is compiled at import or at a call.

Every function takes torch tensors on one CUDA device, runs on
``torch.cuda.current_stream()`` of that device (or ``stream=``, a ``torch.cuda.Stream`` or a
raw ``cuda_stream`` int) without synchronizing, and returns new output tensors (or writes the
``out=`` tensors given). Inputs must be contiguous and start at a 16-byte aligned address
(fresh torch allocations do); anything else raises ``ValueError`` / ``TypeError`` naming the
function, the argument, its value and the fix, before any work is queued. Outputs never alias
inputs (out of place).

    import torch, flydsl
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    y = flydsl.rms_norm(x, torch.ones(4096, device="cuda", dtype=torch.bfloat16), 1e-6)

Safety contract (what the Rust side relies on; torch's usual stream semantics give it): the
tensors stay alive for the call (they do: the arguments are referenced) and their memory for
the queued work (torch's caching allocator reuses a freed block only in the order of its
allocation stream; using a tensor on another stream needs ``tensor.record_stream(s)`` as for
any torch op); other writes to the inputs are ordered on the call's stream; the stream lives
for the rest of the process (torch's own streams do; a ``torch.cuda.ExternalStream`` must).

This module only reads the tensors' attributes (``data_ptr()``, ``shape``, ``stride()``,
``dtype``, ``device``) and allocates outputs with ``torch.empty``; the extension module
``flydsl._flydsl`` validates and launches. Importing flydsl does not import torch.
"""

import sys

from . import _flydsl as _C

__all__ = [
    "rms_norm",
    "rms_norm_quant",
    "rms_norm_backward",
    "layer_norm",
    "layer_norm_quant",
    "layer_norm_backward",
    "softmax",
    "softmax_backward",
    "gemm",
    "gemm_scaled",
    "preshuffle_b",
    "flash_attn",
    "flash_attn_varlen",
    "flash_attn_fp8",
    "flash_attn_varlen_fp8",
    "build_info",
]

__version__ = _C.build_info()["version"]


def build_info():
    """The package version, the GPU targets this build has code for, and the alignment rule."""
    return _C.build_info()


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        import torch  # noqa: PLC0415 - only when a call needs torch (stream, allocation)
    return torch


_BACKEND = []


def _backend():
    """``hip`` under a ROCm build of torch (``torch.version.hip``), else ``cuda``."""
    if not _BACKEND:
        torch = sys.modules.get("torch")
        hip = torch is not None and getattr(getattr(torch, "version", None), "hip", None)
        _BACKEND.append("hip" if hip else "cuda")
    return _BACKEND[0]


def _desc(t, fn, arg):
    """The plain values of tensor ``t``: (data_ptr, shape, strides, dtype, device type, index)."""
    try:
        d = t.device
        return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype), d.type, d.index)
    except AttributeError:
        raise TypeError(
            f"flydsl.{fn}: `{arg}` = a {type(t).__name__}: it must be a torch.Tensor; "
            f"pass a tensor (torch.as_tensor(...).cuda())"
        ) from None


def _opt(t, fn, arg):
    return None if t is None else _desc(t, fn, arg)


def _out(t, fn, arg):
    return None if t is None else (t, _desc(t, fn, arg))


def _stream(stream, like):
    """The raw stream handle: ``stream`` (an int or an object with ``cuda_stream``), else
    torch's current stream on the device of tensor ``like``."""
    if stream is None:
        index = getattr(getattr(like, "device", None), "index", None)
        return _torch().cuda.current_stream(index).cuda_stream
    return getattr(stream, "cuda_stream", stream)


def _alloc(like):
    """The allocator of outputs: ``torch.empty`` on ``like``'s device."""

    def alloc(shape, dtype, index):
        torch = _torch()
        t = torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
        return t, _desc(t, "alloc", "output")

    return alloc


def _needs(fn, given, arg, what):
    """An ``out=``-style tensor passed for an output the call does not write is an error."""
    if given is not None:
        raise ValueError(f"flydsl.{fn}: `{arg}` = a tensor: the call writes no {arg} "
                         f"without {what}; pass {what} or leave `{arg}` out")


def _ret(outs, keep):
    """The outputs of slots ``keep`` (one tensor alone, else a tuple)."""
    got = tuple(outs[i] for i in keep if outs[i] is not None)
    return got[0] if len(got) == 1 else got


# ---- norms ----


def rms_norm(x, weight, eps=1e-5, *, residual=None, return_rstd=False, out=None,
             residual_out=None, rstd=None, stream=None):
    """RMSNorm over the last dimension: ``y = x / sqrt(mean(x**2) + eps) * weight``.

    x: ``[..., n]`` float32/float16/bfloat16; weight ``[n]`` of x's dtype (or float32 with
    16-bit x). With ``residual`` (like x) normalises ``r = x + residual`` (rounded to x's
    dtype) and also returns ``residual_out = r``; with ``return_rstd`` also the per-row
    ``rstd`` (float32, ``x.shape[:-1]``) for the backward. Returns ``y``, or the tuple
    ``(y, [residual_out], [rstd])`` of what was asked for.
    """
    fn = "rms_norm"
    return_rstd = return_rstd or rstd is not None
    if residual is None:
        _needs(fn, residual_out, "residual_out", "residual=")
    outs = _C.norm_fwd(fn, "rms", _backend(), _stream(stream, x), _alloc(x),
                       _desc(x, fn, "x"), _opt(residual, fn, "residual"),
                       _desc(weight, fn, "weight"), None, False, None, return_rstd, eps,
                       (_out(out, fn, "out"), None, _out(residual_out, fn, "residual_out"),
                        None, _out(rstd, fn, "rstd")))
    return _ret(outs, (0, 2, 4))


def rms_norm_quant(x, weight, eps=1e-5, *, xscale=None, residual=None, q=None, yscale=None,
                   residual_out=None, stream=None):
    """RMSNorm followed by per-row int8 quant: ``yscale = rowmax|y * xscale| / 127`` (0 -> 1),
    ``q = trunc(y * xscale / yscale)`` (``xscale`` ``[n]`` float32: smooth quant; None:
    dynamic). Returns ``(q, yscale)`` (int8 like x, float32 ``x.shape[:-1]``), and
    ``residual_out`` last with ``residual``.
    """
    fn = "rms_norm_quant"
    if residual is None:
        _needs(fn, residual_out, "residual_out", "residual=")
    outs = _C.norm_fwd(fn, "rms", _backend(), _stream(stream, x), _alloc(x),
                       _desc(x, fn, "x"), _opt(residual, fn, "residual"),
                       _desc(weight, fn, "weight"), None, True, _opt(xscale, fn, "xscale"),
                       False, eps,
                       (_out(q, fn, "q"), _out(yscale, fn, "yscale"),
                        _out(residual_out, fn, "residual_out"), None, None))
    return _ret(outs, (0, 1, 2))


def rms_norm_backward(dy, x, weight, rstd, *, dresidual=None, strategy="auto", dx=None,
                      dweight=None, stream=None):
    """RMSNorm backward: ``(dx, dweight)`` from ``dy``, the forward's ``x`` (after a fused
    add: its ``residual_out``), ``weight`` and ``rstd``. ``dresidual`` (like x, the gradient
    reaching ``residual_out``) is added to dx. ``strategy``: "auto", "atomic" (f32 atomics)
    or "two_stage" (deterministic) for the weight gradient's sum over rows.
    """
    fn = "rms_norm_backward"
    outs = _C.norm_bwd(fn, "rms", _backend(), _stream(stream, x), _alloc(x),
                       _desc(dy, fn, "dy"), _desc(x, fn, "x"), _desc(weight, fn, "weight"),
                       None, _desc(rstd, fn, "rstd"), _opt(dresidual, fn, "dresidual"), False,
                       strategy, (_out(dx, fn, "dx"), _out(dweight, fn, "dweight"), None))
    return _ret(outs, (0, 1))


def layer_norm(x, weight, bias=None, eps=1e-5, *, residual=None, return_stats=False,
               out=None, residual_out=None, mean=None, rstd=None, stream=None):
    """LayerNorm over the last dimension: ``y = (x - mean) / sqrt(var + eps) * weight + bias``
    (biased variance). x ``[..., n]`` float32/float16/bfloat16, weight and bias ``[n]`` of
    x's dtype. ``residual``: as in :func:`rms_norm`; ``return_stats`` also returns the
    per-row ``mean`` and ``rstd`` (float32). Returns ``y`` or
    ``(y, [residual_out], [mean, rstd])``.
    """
    fn = "layer_norm"
    return_stats = return_stats or mean is not None or rstd is not None
    if residual is None:
        _needs(fn, residual_out, "residual_out", "residual=")
    outs = _C.norm_fwd(fn, "layer", _backend(), _stream(stream, x), _alloc(x),
                       _desc(x, fn, "x"), _opt(residual, fn, "residual"),
                       _desc(weight, fn, "weight"), _opt(bias, fn, "bias"), False, None,
                       return_stats, eps,
                       (_out(out, fn, "out"), None, _out(residual_out, fn, "residual_out"),
                        _out(mean, fn, "mean"), _out(rstd, fn, "rstd")))
    return _ret(outs, (0, 2, 3, 4))


def layer_norm_quant(x, weight, bias=None, eps=1e-5, *, xscale=None, residual=None, q=None,
                     yscale=None, residual_out=None, stream=None):
    """LayerNorm followed by per-row int8 quant (as :func:`rms_norm_quant`). Returns
    ``(q, yscale)``, and ``residual_out`` last with ``residual``."""
    fn = "layer_norm_quant"
    if residual is None:
        _needs(fn, residual_out, "residual_out", "residual=")
    outs = _C.norm_fwd(fn, "layer", _backend(), _stream(stream, x), _alloc(x),
                       _desc(x, fn, "x"), _opt(residual, fn, "residual"),
                       _desc(weight, fn, "weight"), _opt(bias, fn, "bias"), True,
                       _opt(xscale, fn, "xscale"), False, eps,
                       (_out(q, fn, "q"), _out(yscale, fn, "yscale"),
                        _out(residual_out, fn, "residual_out"), None, None))
    return _ret(outs, (0, 1, 2))


def layer_norm_backward(dy, x, weight, mean, rstd, *, compute_dbias=True, strategy="auto",
                        dx=None, dweight=None, dbias=None, stream=None):
    """LayerNorm backward: ``(dx, dweight, dbias)`` (``(dx, dweight)`` without
    ``compute_dbias``) from ``dy``, the forward's ``x``, ``weight``, ``mean`` and ``rstd``."""
    fn = "layer_norm_backward"
    if not compute_dbias:
        _needs(fn, dbias, "dbias", "compute_dbias=True")
    outs = _C.norm_bwd(fn, "layer", _backend(), _stream(stream, x), _alloc(x),
                       _desc(dy, fn, "dy"), _desc(x, fn, "x"), _desc(weight, fn, "weight"),
                       _desc(mean, fn, "mean"), _desc(rstd, fn, "rstd"), None, compute_dbias,
                       strategy, (_out(dx, fn, "dx"), _out(dweight, fn, "dweight"),
                                  _out(dbias, fn, "dbias")))
    return _ret(outs, (0, 1, 2))


# ---- softmax ----


def softmax(x, *, out=None, stream=None):
    """``softmax(x, dim=-1)`` (float32 math; x's dtype out)."""
    fn = "softmax"
    return _C.softmax(_backend(), _stream(stream, x), _alloc(x), _desc(x, fn, "x"),
                      (_out(out, fn, "out"),))[0]


def softmax_backward(y, dy, *, dx=None, stream=None):
    """``dx = y * (dy - sum(dy * y, dim=-1))`` from the forward's output ``y``."""
    fn = "softmax_backward"
    return _C.softmax_backward(_backend(), _stream(stream, y), _alloc(y), _desc(y, fn, "y"),
                               _desc(dy, fn, "dy"), (_out(dx, fn, "dx"),))[0]


# ---- GEMM ----


def gemm(a, b, bias=None, *, activation=None, b_preshuffled=False, out=None, stream=None):
    """``out = act(a @ b.T + bias)``: a ``[..., k]``, b ``[n, k]`` (a linear layer's weight;
    with ``b_preshuffled`` the result of :func:`preshuffle_b`), bias ``[n]``, all bfloat16 or
    all float16; f32 accumulation. ``activation``: None, "relu", "silu" or "gelu" (tanh
    approximation; needs a bias). Returns ``out`` ``a.shape[:-1] + (n,)``."""
    fn = "gemm"
    return _C.gemm(fn, _backend(), _stream(stream, a), _alloc(a), _desc(a, fn, "a"),
                   _desc(b, fn, "b"), None, _opt(bias, fn, "bias"), activation, b_preshuffled,
                   None, (_out(out, fn, "out"),))[0]


def gemm_scaled(a, b, scale_a, scale_b, bias=None, *, activation=None, out_dtype=None,
                b_preshuffled=False, out=None, stream=None):
    """8-bit GEMM: ``out = act((a @ b.T) * scale_a[m] * scale_b[n] + bias)`` with a, b both
    torch.float8_e4m3fn (H100/H200, gfx950+), float8_e4m3fnuz (gfx942) or int8 (exact int32
    accumulation), ``scale_a`` m and ``scale_b`` n float32 values (m = rows of a), bias
    ``[n]`` and ``out`` of ``out_dtype`` (torch.bfloat16, default, or torch.float16)."""
    fn = "gemm_scaled"
    od = None if out_dtype is None else str(out_dtype)
    return _C.gemm(fn, _backend(), _stream(stream, a), _alloc(a), _desc(a, fn, "a"),
                   _desc(b, fn, "b"), (_desc(scale_a, fn, "scale_a"),
                                       _desc(scale_b, fn, "scale_b")),
                   _opt(bias, fn, "bias"), activation, b_preshuffled, od,
                   (_out(out, fn, "out"),))[0]


def preshuffle_b(b):
    """B ``[n, k]`` in the preshuffled layout that ``b_preshuffled=True`` reads (the same
    shape; for each 16 rows and 16-byte column chunk the 16 x 16 bytes are contiguous:
    ``s[n0, c, nl, kp] = b[16 n0 + nl, c KPACK + kp]``, KPACK = 16 / element size). Needs
    ``n % 16 == 0`` and ``k * element_size % 64 == 0``. Runs as torch ops on b's device."""
    if b.dim() != 2:
        raise ValueError(f"flydsl.preshuffle_b: `b` = a tensor of shape {list(b.shape)}: b is "
                         f"[n, k]; pass a 2-d tensor")
    n, k = b.shape
    es = b.element_size()
    if n % 16 or (k * es) % 64:
        raise ValueError(f"flydsl.preshuffle_b: `b` = a tensor of shape {list(b.shape)} of "
                         f"{es}-byte elements: the layout needs n % 16 == 0 and "
                         f"k * {es} % 64 == 0; pad n and k")
    kpack = 16 // es
    return (b.contiguous().reshape(n // 16, 16, k // kpack, kpack).permute(0, 2, 1, 3)
            .contiguous().reshape(n, k))


# ---- attention ----


def _seqlens(cu, fn, arg):
    if hasattr(cu, "data_ptr"):
        if cu.device.type == "cpu":
            return ("host", cu.tolist())
        return ("device", _desc(cu, fn, arg))
    return ("host", list(cu))


def _attn(fn, q, k, v, descales, varlen, causal, softmax_scale, return_lse, num_kv_splits,
          kernel, out, lse, stream):
    return_lse = return_lse or lse is not None
    outs = _C.attention(fn, _backend(), _stream(stream, q), _alloc(q), _desc(q, fn, "q"),
                        _desc(k, fn, "k"), _desc(v, fn, "v"), descales, varlen, causal,
                        softmax_scale, num_kv_splits, kernel, return_lse,
                        (_out(out, fn, "out"), _out(lse, fn, "lse")))
    return _ret(outs, (0, 1))


def flash_attn(q, k, v, *, causal=False, softmax_scale=None, return_lse=False,
               num_kv_splits=None, kernel="auto", out=None, lse=None, stream=None):
    """FlashAttention forward, dense BSHD: q ``[batch, seqlen_q, heads_q, head_dim]``, k and
    v ``[batch, seqlen_kv, heads_kv, head_dim]`` (bfloat16 or float16; heads_q a multiple of
    heads_kv; head_dim a multiple of 32 up to 256). Causal is bottom-right aligned. Returns
    ``out`` (like q), or ``(out, lse)`` with ``return_lse`` (float32
    ``[batch, heads_q, seqlen_q]``). ``kernel``: "auto", "portable" or "hopper" (sm90 wgmma,
    head_dim 64/128/256)."""
    return _attn("flash_attn", q, k, v, None, None, causal, softmax_scale, return_lse,
                 num_kv_splits, kernel, out, lse, stream)


def flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv, *,
                      causal=False, softmax_scale=None, return_lse=False, num_kv_splits=None,
                      kernel="auto", out=None, lse=None, stream=None):
    """FlashAttention forward on packed sequences: q ``[total_q, heads_q, head_dim]``, k and v
    ``[total_kv, heads_kv, head_dim]``, ``cu_seqlens_*`` the ``batch + 1`` cumulative offsets
    (a list, a CPU tensor, or an int32 tensor on the device, which is read back: a
    synchronizing copy). LSE is ``[heads_q, total_q]``."""
    fn = "flash_attn_varlen"
    vl = (_seqlens(cu_seqlens_q, fn, "cu_seqlens_q"), _seqlens(cu_seqlens_kv, fn,
          "cu_seqlens_kv"), max_seqlen_q, max_seqlen_kv)
    return _attn(fn, q, k, v, None, vl, causal, softmax_scale, return_lse, num_kv_splits,
                 kernel, out, lse, stream)


def flash_attn_fp8(q, k, v, q_descale, k_descale, v_descale, *, causal=False,
                   softmax_scale=None, return_lse=False, num_kv_splits=None, kernel="auto",
                   out=None, lse=None, stream=None):
    """:func:`flash_attn` on torch.float8_e4m3fn q, k, v with per-tensor float32 descales
    (1 element each, on the device; real value = fp8 * descale). Returns bfloat16 ``out``."""
    fn = "flash_attn_fp8"
    ds = (_desc(q_descale, fn, "q_descale"), _desc(k_descale, fn, "k_descale"),
          _desc(v_descale, fn, "v_descale"))
    return _attn(fn, q, k, v, ds, None, causal, softmax_scale, return_lse, num_kv_splits,
                 kernel, out, lse, stream)


def flash_attn_varlen_fp8(q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
                          q_descale, k_descale, v_descale, *, causal=False, softmax_scale=None,
                          return_lse=False, num_kv_splits=None, kernel="auto", out=None,
                          lse=None, stream=None):
    """:func:`flash_attn_varlen` on float8_e4m3fn q, k, v with descales (bfloat16 out)."""
    fn = "flash_attn_varlen_fp8"
    ds = (_desc(q_descale, fn, "q_descale"), _desc(k_descale, fn, "k_descale"),
          _desc(v_descale, fn, "v_descale"))
    vl = (_seqlens(cu_seqlens_q, fn, "cu_seqlens_q"), _seqlens(cu_seqlens_kv, fn,
          "cu_seqlens_kv"), max_seqlen_q, max_seqlen_kv)
    return _attn(fn, q, k, v, ds, vl, causal, softmax_scale, return_lse, num_kv_splits,
                 kernel, out, lse, stream)
