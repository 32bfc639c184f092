"""The flydsl package's argument errors, through the built extension, with duck-typed tensor
stand-ins (no torch, no GPU): every bad input raises the documented exception naming the
public function, the argument, its value and the fix, before any device is touched; a good
input gets as far as the device lookup (which fails clearly without a CUDA driver).

Run: python3 -m unittest discover -s flydsl-py/tests (with the package on PYTHONPATH; CI
copies the extension built by cargo next to python/flydsl, see .ci/run).
"""
import math
import os
import sys
import unittest

import flydsl


class Device:
    def __init__(self, type_="cuda", index=0):
        self.type, self.index = type_, index


class Fake:
    """What flydsl reads of a torch tensor: data_ptr(), shape, stride(), dtype, device."""

    _next = [1 << 32]

    def __init__(self, shape, dtype="torch.bfloat16", strides=None, ptr=None,
                 device=None):
        self.shape = tuple(shape)
        if strides is None:
            strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        self._strides = tuple(strides)
        self.dtype = dtype
        if ptr is None:
            ptr = Fake._next[0]
            Fake._next[0] += 1 << 24  # separate, 16-byte aligned "allocations"
        self._ptr = ptr
        self.device = device or Device()

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides


def call(fn, *args, **kw):
    kw.setdefault("stream", 0)
    return fn(*args, **kw)


class Errors(unittest.TestCase):
    def raises(self, exc, parts, fn, *args, **kw):
        with self.assertRaises(exc) as cm:
            call(fn, *args, **kw)
        msg = str(cm.exception)
        for p in parts:
            self.assertIn(p, msg)
        return msg

    def test_import_does_not_import_torch(self):
        self.assertNotIn("torch", sys.modules)
        self.assertEqual(flydsl.build_info()["align"], 16)

    def test_non_contiguous_input(self):
        x = Fake([8, 4], strides=[1, 8])  # a transposed view
        self.raises(ValueError, ["flydsl.rms_norm: `x`", "strides [1, 8]", "contiguous",
                                 "x.contiguous()"],
                    flydsl.rms_norm, x, Fake([4]), out=Fake([8, 4]))
        self.raises(ValueError, ["flydsl.gemm: `b`", "contiguous"], flydsl.gemm,
                    Fake([4, 16]), Fake([16, 8], strides=[1, 16]), out=Fake([4, 8]))
        self.raises(ValueError, ["flydsl.flash_attn: `k`", "contiguous"], flydsl.flash_attn,
                    Fake([1, 4, 2, 64]), Fake([1, 4, 2, 64], strides=[512, 64, 256, 1]),
                    Fake([1, 4, 2, 64]), out=Fake([1, 4, 2, 64]))

    def test_misaligned_and_overlapping(self):
        self.raises(ValueError, ["flydsl.softmax: `x`", "multiple of 16 bytes", "x.clone()"],
                    flydsl.softmax, Fake([3, 5], ptr=(1 << 20) + 2), out=Fake([3, 5]))
        x = Fake([4, 8])
        self.raises(ValueError, ["`out`", "overlaps `x`", "out of place"], flydsl.softmax,
                    x, out=Fake([4, 8], ptr=x.data_ptr() + 16))

    def test_dtypes_and_types(self):
        self.raises(TypeError, ["flydsl.softmax: `x`", "torch.int32",
                                "torch.float32, torch.float16 or torch.bfloat16"],
                    flydsl.softmax, Fake([2, 2], dtype="torch.int32"), out=Fake([2, 2]))
        self.raises(TypeError, ["flydsl.gemm_scaled: `a`", "float8_e4m3fn"],
                    flydsl.gemm_scaled, Fake([2, 16]), Fake([16, 16]), Fake([2], "torch.float32"),
                    Fake([16], "torch.float32"), out=Fake([2, 16]))
        self.raises(TypeError, ["flydsl.softmax: `x` = a list", "torch.Tensor"], flydsl.softmax,
                    [1.0, 2.0])
        self.raises(TypeError, ["flydsl.rms_norm: `out`", "torch.bfloat16"], flydsl.rms_norm,
                    Fake([2, 8]), Fake([8]), out=Fake([2, 8], dtype="torch.float32"))

    def test_devices(self):
        self.raises(ValueError, ["flydsl.softmax: `x`", "on cpu", "x.cuda()"], flydsl.softmax,
                    Fake([2, 2], device=Device("cpu", None)), out=Fake([2, 2]))
        self.raises(ValueError, ["`weight`", "cuda:1", "`x` is on cuda:0"], flydsl.rms_norm,
                    Fake([2, 8]), Fake([8], device=Device("cuda", 1)), out=Fake([2, 8]))

    def test_shapes_and_options(self):
        self.raises(ValueError, ["flydsl.rms_norm: `weight`", "shape [8]"], flydsl.rms_norm,
                    Fake([2, 8]), Fake([7]), out=Fake([2, 8]))
        self.raises(ValueError, ["flydsl.gemm: `out`", "shape [4, 3]"], flydsl.gemm,
                    Fake([4, 8]), Fake([3, 8]), out=Fake([4, 4]))
        self.raises(ValueError, ["`activation`", "pass a bias"], flydsl.gemm, Fake([4, 8]),
                    Fake([3, 8]), activation="relu", out=Fake([4, 3]))
        self.raises(ValueError, ["`strategy`", "two_stage"], flydsl.rms_norm_backward,
                    Fake([2, 8]), Fake([2, 8]), Fake([8]), Fake([2], "torch.float32"),
                    strategy="fast", dx=Fake([2, 8]), dweight=Fake([8]))
        self.raises(ValueError, ["flydsl.flash_attn: `q`", "4 dimensions"], flydsl.flash_attn,
                    Fake([4, 2, 64]), Fake([4, 2, 64]), Fake([4, 2, 64]), out=Fake([4, 2, 64]))
        self.raises(ValueError, ["`kernel`", "\"hopper\""], flydsl.flash_attn,
                    Fake([1, 4, 2, 64]), Fake([1, 4, 2, 64]), Fake([1, 4, 2, 64]),
                    kernel="best", out=Fake([1, 4, 2, 64]))
        self.raises(ValueError, ["`cu_seqlens_q`", "int32"], flydsl.flash_attn_varlen,
                    Fake([4, 2, 64]), Fake([4, 2, 64]), Fake([4, 2, 64]), [0, 2**40], [0, 4], 4,
                    4, out=Fake([4, 2, 64]))

    def test_integer_widths(self):
        self.raises(ValueError, ["`x.data_ptr()`", "2**64"], flydsl.softmax,
                    Fake([2, 2], ptr=1 << 70), out=Fake([2, 2]))
        self.raises(ValueError, ["`x.shape`", "64 bits"], flydsl.softmax,
                    Fake([1 << 70, 2], strides=[2, 1]), out=Fake([2, 2]))
        self.raises(ValueError, ["`x`", "overflows 64 bits"], flydsl.softmax,
                    Fake([1 << 62, 8], strides=[8, 1]), out=Fake([2, 2]))
        self.raises(ValueError, ["`stream`", "cuda_stream"], flydsl.softmax, Fake([2, 2]),
                    out=Fake([2, 2]), stream=-1)
        self.raises(ValueError, ["`num_kv_splits`", "64 bits"], flydsl.flash_attn,
                    Fake([1, 4, 2, 64]), Fake([1, 4, 2, 64]), Fake([1, 4, 2, 64]),
                    num_kv_splits=1 << 80, out=Fake([1, 4, 2, 64]))

    def test_option_types(self):
        self.raises(ValueError, ["flydsl.rms_norm: `eps` = 'big'", "number"], flydsl.rms_norm,
                    Fake([2, 8]), Fake([8]), "big", out=Fake([2, 8]))
        self.raises(ValueError, ["flydsl.gemm: `activation` = 3", "string"], flydsl.gemm,
                    Fake([4, 8]), Fake([3, 8]), activation=3, out=Fake([4, 3]))
        self.raises(ValueError, ["`softmax_scale`", "number"], flydsl.flash_attn,
                    Fake([1, 4, 2, 64]), Fake([1, 4, 2, 64]), Fake([1, 4, 2, 64]),
                    softmax_scale="x", out=Fake([1, 4, 2, 64]))

    def test_outputs_the_call_does_not_write(self):
        self.raises(ValueError, ["flydsl.rms_norm: `residual_out`", "residual="],
                    flydsl.rms_norm, Fake([2, 8]), Fake([8]), out=Fake([2, 8]),
                    residual_out=Fake([2, 8]))
        self.raises(ValueError, ["`dbias`", "compute_dbias=True"], flydsl.layer_norm_backward,
                    Fake([2, 8]), Fake([2, 8]), Fake([8]), Fake([2], "torch.float32"),
                    Fake([2], "torch.float32"), compute_dbias=False, dbias=Fake([8]))

    def test_valid_input_reaches_the_device_lookup(self):
        # Everything checkable passed: the next step is the CUDA driver, which CI lacks (on a
        # GPU machine the fake pointers would be refused by the driver's range check).
        msg = self.raises(RuntimeError, ["flydsl.softmax"], flydsl.softmax, Fake([2, 8]),
                          out=Fake([2, 8]))
        if os.environ.get("CI"):
            self.assertIn("CUDA backend is unavailable", msg)

    def test_preshuffle_bytes(self):
        n, k = 16, 64
        b = bytes(range(256)) * (n * k // 256)
        s = flydsl._flydsl.preshuffle_b_bytes(b, n, k, 1)
        self.assertEqual(len(s), len(b))
        self.assertEqual(s[16:32], b[k:k + 16])  # row 1's first chunk follows row 0's
        with self.assertRaises(ValueError):
            flydsl._flydsl.preshuffle_b_bytes(b, 15, k, 1)


if __name__ == "__main__":
    unittest.main()
