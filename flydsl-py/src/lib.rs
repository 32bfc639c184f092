//! `flydsl._flydsl`: the PyO3 extension module of the `flydsl` Python package. It converts
//! the plain values the package's Python layer (`python/flydsl/__init__.py`) reads from torch
//! tensors into `flydsl_bind` descriptors, runs the call, and turns errors into Python
//! exceptions (`ValueError`, `TypeError`, `RuntimeError`) naming the public function, the
//! argument, its value and the fix. A Rust panic never crosses into Python: it is caught and
//! raised as a `RuntimeError`.
//!
//! A tensor descriptor is the tuple `(data_ptr, shape, strides, dtype_name, device_type,
//! device_index)`; an output is `None` (allocated through the `alloc` callable, which takes
//! `(shape, dtype_name, device_index)` and returns `(tensor, descriptor)`) or `(tensor,
//! descriptor)`. Each function returns its output tensors by slot (`None` for slots the call
//! does not write).

use flydsl_bind::attn::{Attn, Seqlens, Varlen};
use flydsl_bind::gemm::Gemm;
use flydsl_bind::norm::{NormBwd, NormFwd};
use flydsl_bind::{Alloc, BindError, Dtype, Env, ErrorKind, Gpu, Tensor, View};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A binding error as the Python exception of its kind.
fn to_py(e: BindError) -> PyErr {
    match e.kind {
        ErrorKind::Value => PyValueError::new_err(e.message),
        ErrorKind::Type => PyTypeError::new_err(e.message),
        ErrorKind::Runtime => PyRuntimeError::new_err(e.message),
    }
}

/// `repr(obj)`, or a placeholder when even that fails.
fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "<unprintable>".into())
}

/// A `Value` error "op: `arg` = repr: rule; fix".
fn bad(op: &str, arg: &str, obj: &Bound<'_, PyAny>, rule: &str, fix: &str) -> PyErr {
    to_py(BindError::new(
        ErrorKind::Value,
        format!("flydsl.{op}: `{arg}` = {}: {rule}; {fix}", repr(obj)),
    ))
}

/// A Python int that fits `i64`.
fn int_i64(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    obj.extract::<i64>().map_err(|_| {
        bad(
            op,
            arg,
            obj,
            "it must be an integer that fits in 64 bits (signed)",
            "pass a Python int",
        )
    })
}

/// A Python float (or int) argument.
fn float_arg(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    obj.extract::<f64>()
        .map_err(|_| bad(op, arg, obj, "it must be a number", "pass a Python float"))
}

/// An optional float argument (`None` stays `None`).
fn opt_float_arg(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    if obj.is_none() {
        Ok(None)
    } else {
        float_arg(op, arg, obj).map(Some)
    }
}

/// A flag: Python truthiness (`bool(obj)`).
fn flag(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    obj.is_truthy()
}

/// An optional string argument.
fn opt_str_arg(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if obj.is_none() {
        return Ok(None);
    }
    obj.extract::<String>().map(Some).map_err(|_| {
        bad(
            op,
            arg,
            obj,
            "it must be a string or None",
            "pass e.g. \"relu\"",
        )
    })
}

/// The tensor descriptor `obj` of argument `arg`.
fn desc(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let fix = "pass a torch tensor";
    let tuple = obj
        .cast::<PyTuple>()
        .ok()
        .filter(|t| t.len() == 6)
        .ok_or_else(|| bad(op, arg, obj, "a tensor descriptor is a 6-tuple", fix))?;
    let item = |i| tuple.get_item(i);
    let p = item(0)?;
    let ptr = p.extract::<u64>().map_err(|_| {
        bad(
            op,
            &format!("{arg}.data_ptr()"),
            &p,
            "a device address is a non-negative integer below 2**64",
            fix,
        )
    })?;
    let ints = |i: usize, what: &str| -> PyResult<Vec<i64>> {
        let o = item(i)?;
        o.extract::<Vec<i64>>().map_err(|_| {
            bad(
                op,
                &format!("{arg}.{what}"),
                &o,
                "sizes and strides are tuples of integers that fit in 64 bits",
                fix,
            )
        })
    };
    let shape = ints(1, "shape")?;
    let strides = ints(2, "stride()")?;
    let dtype = item(3)?.str()?.to_string();
    let device = item(4)?.str()?.to_string();
    let i = item(5)?;
    let index = if i.is_none() {
        None
    } else {
        Some(int_i64(op, &format!("{arg}.device.index"), &i)?)
    };
    Ok(Tensor {
        ptr,
        shape,
        strides,
        dtype,
        device,
        index,
    })
}

/// An optional tensor descriptor.
fn opt_desc(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
    if obj.is_none() {
        Ok(None)
    } else {
        desc(op, arg, obj).map(Some)
    }
}

/// The backend and stream of a call.
fn env(op: &str, backend: &str, stream: &Bound<'_, PyAny>) -> PyResult<Env> {
    let gpu = match backend {
        "cuda" => Gpu::Cuda,
        "hip" => Gpu::Hip,
        other => {
            return Err(to_py(BindError::new(
                ErrorKind::Value,
                format!("flydsl.{op}: backend {other:?} is not \"cuda\" or \"hip\""),
            )))
        }
    };
    let stream = stream.extract::<u64>().map_err(|_| {
        bad(
            op,
            "stream",
            stream,
            "a stream handle is a non-negative integer below 2**64 (`cuda_stream`)",
            "pass torch.cuda.current_stream() or its .cuda_stream",
        )
    })?;
    Ok(Env { gpu, stream })
}

/// The outputs of one call: the caller's tensor objects and the allocator's, by slot.
struct Outs<'py> {
    op: String,
    alloc: Bound<'py, PyAny>,
    objs: Vec<Option<Py<PyAny>>>,
    given: Vec<Option<Tensor>>,
    /// The Python exception the allocator raised (re-raised as is after the call).
    err: Option<PyErr>,
}

impl<'py> Outs<'py> {
    /// The outputs tuple `outs` (each `None` or `(tensor, descriptor)`) of `names`.
    fn new(
        op: &str,
        alloc: Bound<'py, PyAny>,
        outs: &Bound<'py, PyAny>,
        names: &[&str],
    ) -> PyResult<Outs<'py>> {
        let items: Vec<Bound<'py, PyAny>> = outs.extract().map_err(|_| {
            bad(
                op,
                "outputs",
                outs,
                "the outputs are a tuple",
                "pass a tuple",
            )
        })?;
        if items.len() != names.len() {
            return Err(bad(
                op,
                "outputs",
                outs,
                &format!("the call has {} outputs", names.len()),
                "pass one entry per output",
            ));
        }
        let (mut objs, mut given) = (Vec::new(), Vec::new());
        for (item, name) in items.iter().zip(names) {
            if item.is_none() {
                objs.push(None);
                given.push(None);
                continue;
            }
            let (obj, d): (Bound<'py, PyAny>, Bound<'py, PyAny>) =
                item.extract().map_err(|_| {
                    bad(
                        op,
                        name,
                        item,
                        "an output is None or (tensor, descriptor)",
                        "pass a torch tensor",
                    )
                })?;
            given.push(Some(desc(op, name, &d)?));
            objs.push(Some(obj.unbind()));
        }
        Ok(Outs {
            op: op.to_string(),
            alloc,
            objs,
            given,
            err: None,
        })
    }

    /// The caller's output descriptor of `slot`.
    fn given(&self, slot: usize) -> Option<&Tensor> {
        self.given[slot].as_ref()
    }

    /// The result of a call that wrote `written`: the output objects by slot.
    fn finish<const N: usize>(
        mut self,
        py: Python<'py>,
        r: std::thread::Result<flydsl_bind::Result<[Option<View>; N]>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let written = self.result(r)?;
        let objs: Vec<Option<Py<PyAny>>> = written
            .iter()
            .zip(self.objs.iter_mut())
            .map(|(w, o)| if w.is_some() { o.take() } else { None })
            .collect();
        PyTuple::new(py, objs)
    }

    fn result<T>(&mut self, r: std::thread::Result<flydsl_bind::Result<T>>) -> PyResult<T> {
        match r {
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                Err(PyRuntimeError::new_err(format!(
                    "flydsl.{}: internal error (a flydsl bug; please report it): {what}",
                    self.op
                )))
            }
            Ok(Err(e)) => Err(self.err.take().unwrap_or_else(|| to_py(e))),
            Ok(Ok(v)) => Ok(v),
        }
    }
}

impl Alloc for Outs<'_> {
    fn alloc(
        &mut self,
        slot: usize,
        shape: &[usize],
        dtype: Dtype,
        index: Option<i64>,
    ) -> flydsl_bind::Result<Tensor> {
        let fail = |e: PyErr, this: &mut Self| {
            let msg = format!("flydsl.{}: allocating output {slot} failed: {e}", this.op);
            this.err = Some(e);
            BindError::new(ErrorKind::Runtime, msg)
        };
        let made = self
            .alloc
            .call1((shape.to_vec(), dtype.name(), index))
            .and_then(|r| r.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>());
        let (obj, d) = match made {
            Ok(v) => v,
            Err(e) => return Err(fail(e, self)),
        };
        let t = match desc(&self.op, "allocated output", &d) {
            Ok(t) => t,
            Err(e) => return Err(fail(e, self)),
        };
        self.objs[slot] = Some(obj.unbind());
        Ok(t)
    }
}

/// LayerNorm / RMSNorm forward (see `flydsl_bind::norm::NormFwd`). Returns the 5 output slots.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn norm_fwd<'py>(
    py: Python<'py>,
    name: &str,
    norm: &str,
    backend: &str,
    stream: &Bound<'py, PyAny>,
    alloc: Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    residual: &Bound<'py, PyAny>,
    weight: &Bound<'py, PyAny>,
    bias: &Bound<'py, PyAny>,
    quant: &Bound<'py, PyAny>,
    xscale: &Bound<'py, PyAny>,
    stats: &Bound<'py, PyAny>,
    eps: &Bound<'py, PyAny>,
    outs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let env = env(name, backend, stream)?;
    let (quant, stats, eps) = (flag(quant)?, flag(stats)?, float_arg(name, "eps", eps)?);
    let norm = parse_norm(name, norm)?;
    let (x, residual) = (desc(name, "x", x)?, opt_desc(name, "residual", residual)?);
    let (weight, bias) = (desc(name, "weight", weight)?, opt_desc(name, "bias", bias)?);
    let xscale = opt_desc(name, "xscale", xscale)?;
    let names = ["out", "yscale", "residual_out", "mean", "rstd"];
    let mut o = Outs::new(name, alloc, outs, &names)?;
    let given: Vec<Option<Tensor>> = (0..5).map(|i| o.given(i).cloned()).collect();
    let a = NormFwd {
        name,
        norm,
        x: &x,
        residual: residual.as_ref(),
        weight: &weight,
        bias: bias.as_ref(),
        quant,
        xscale: xscale.as_ref(),
        stats,
        eps,
        outs: std::array::from_fn(|i| given[i].as_ref()),
    };
    // SAFETY: the descriptors were read by the package's Python layer from live torch tensors
    // that it holds for the whole call (the contract of `flydsl_bind`, restated in
    // `python/flydsl/__init__.py`); the stream is torch's current stream of their device.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        flydsl_bind::norm::norm_fwd(env, &mut o, &a)
    }));
    o.finish(py, r)
}

/// LayerNorm / RMSNorm backward (see `flydsl_bind::norm::NormBwd`). Returns the 3 output slots.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn norm_bwd<'py>(
    py: Python<'py>,
    name: &str,
    norm: &str,
    backend: &str,
    stream: &Bound<'py, PyAny>,
    alloc: Bound<'py, PyAny>,
    dy: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    weight: &Bound<'py, PyAny>,
    mean: &Bound<'py, PyAny>,
    rstd: &Bound<'py, PyAny>,
    dresidual: &Bound<'py, PyAny>,
    dbias: &Bound<'py, PyAny>,
    strategy: &str,
    outs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let env = env(name, backend, stream)?;
    let norm = parse_norm(name, norm)?;
    let (dy, x, weight) = (
        desc(name, "dy", dy)?,
        desc(name, "x", x)?,
        desc(name, "weight", weight)?,
    );
    let (mean, rstd) = (opt_desc(name, "mean", mean)?, desc(name, "rstd", rstd)?);
    let dresidual = opt_desc(name, "dresidual", dresidual)?;
    let dbias = flag(dbias)?;
    let mut o = Outs::new(name, alloc, outs, &["dx", "dweight", "dbias"])?;
    let given: Vec<Option<Tensor>> = (0..3).map(|i| o.given(i).cloned()).collect();
    let a = NormBwd {
        name,
        norm,
        dy: &dy,
        x: &x,
        weight: &weight,
        mean: mean.as_ref(),
        rstd: &rstd,
        dresidual: dresidual.as_ref(),
        dbias,
        strategy,
        outs: std::array::from_fn(|i| given[i].as_ref()),
    };
    // SAFETY: as in `norm_fwd`.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        flydsl_bind::norm::norm_bwd(env, &mut o, &a)
    }));
    o.finish(py, r)
}

fn parse_norm(op: &str, norm: &str) -> PyResult<fly_norm::Norm> {
    match norm {
        "rms" => Ok(fly_norm::Norm::Rms),
        "layer" => Ok(fly_norm::Norm::Layer),
        other => Err(to_py(BindError::new(
            ErrorKind::Value,
            format!("flydsl.{op}: norm {other:?} is not \"rms\" or \"layer\""),
        ))),
    }
}

/// Softmax forward over the last dimension. Returns the 1 output slot.
#[pyfunction]
fn softmax<'py>(
    py: Python<'py>,
    backend: &str,
    stream: &Bound<'py, PyAny>,
    alloc: Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    outs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let name = "softmax";
    let env = env(name, backend, stream)?;
    let x = desc(name, "x", x)?;
    let mut o = Outs::new(name, alloc, outs, &["out"])?;
    let given = o.given(0).cloned();
    // SAFETY: as in `norm_fwd`.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        flydsl_bind::softmax::softmax(env, &mut o, &x, given.as_ref()).map(|v| [Some(v)])
    }));
    o.finish(py, r)
}

/// Softmax backward. Returns the 1 output slot.
#[pyfunction]
fn softmax_backward<'py>(
    py: Python<'py>,
    backend: &str,
    stream: &Bound<'py, PyAny>,
    alloc: Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    dy: &Bound<'py, PyAny>,
    outs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let name = "softmax_backward";
    let env = env(name, backend, stream)?;
    let (y, dy) = (desc(name, "y", y)?, desc(name, "dy", dy)?);
    let mut o = Outs::new(name, alloc, outs, &["dx"])?;
    let given = o.given(0).cloned();
    // SAFETY: as in `norm_fwd`.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        flydsl_bind::softmax::softmax_backward(env, &mut o, &y, &dy, given.as_ref())
            .map(|v| [Some(v)])
    }));
    o.finish(py, r)
}

/// GEMM, 16-bit or 8-bit scaled (`scales` is `None` or `(scale_a, scale_b)`). Returns the 1
/// output slot.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn gemm<'py>(
    py: Python<'py>,
    name: &str,
    backend: &str,
    stream: &Bound<'py, PyAny>,
    alloc: Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    scales: &Bound<'py, PyAny>,
    bias: &Bound<'py, PyAny>,
    activation: &Bound<'py, PyAny>,
    b_preshuffled: &Bound<'py, PyAny>,
    out_dtype: &Bound<'py, PyAny>,
    outs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let env = env(name, backend, stream)?;
    let activation = opt_str_arg(name, "activation", activation)?;
    let out_dtype = opt_str_arg(name, "out_dtype", out_dtype)?;
    let b_preshuffled = flag(b_preshuffled)?;
    let (a, b) = (desc(name, "a", a)?, desc(name, "b", b)?);
    let scales = if scales.is_none() {
        None
    } else {
        let (sa, sb): (Bound<'py, PyAny>, Bound<'py, PyAny>) = scales.extract()?;
        Some((desc(name, "scale_a", &sa)?, desc(name, "scale_b", &sb)?))
    };
    let bias = opt_desc(name, "bias", bias)?;
    let mut o = Outs::new(name, alloc, outs, &["out"])?;
    let given = o.given(0).cloned();
    let g = Gemm {
        name,
        a: &a,
        b: &b,
        scales: scales.as_ref().map(|(x, y)| (x, y)),
        bias: bias.as_ref(),
        activation: activation.as_deref(),
        b_preshuffled,
        out_dtype: out_dtype.as_deref(),
        out: given.as_ref(),
    };
    // SAFETY: as in `norm_fwd`.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        flydsl_bind::gemm::gemm(env, &mut o, &g).map(|v| [Some(v)])
    }));
    o.finish(py, r)
}

/// Cumulative offsets: `("host", [ints])` or `("device", descriptor)`.
fn seqlens(op: &str, arg: &str, obj: &Bound<'_, PyAny>) -> PyResult<SeqlensOwned> {
    let (kind, v): (String, Bound<'_, PyAny>) = obj.extract().map_err(|_| {
        bad(
            op,
            arg,
            obj,
            "offsets are (\"host\", list) or (\"device\", descriptor)",
            "pass a list or an int32 tensor",
        )
    })?;
    match kind.as_str() {
        "host" => {
            let items: Vec<Bound<'_, PyAny>> = v.extract().map_err(|_| {
                bad(
                    op,
                    arg,
                    &v,
                    "host offsets are a list of integers",
                    "pass a list of ints",
                )
            })?;
            let vals = items
                .iter()
                .map(|i| int_i64(op, arg, i))
                .collect::<PyResult<Vec<i64>>>()?;
            Ok(SeqlensOwned::Host(vals))
        }
        _ => Ok(SeqlensOwned::Device(desc(op, arg, &v)?)),
    }
}

enum SeqlensOwned {
    Host(Vec<i64>),
    Device(Tensor),
}

impl SeqlensOwned {
    fn view(&self) -> Seqlens<'_> {
        match self {
            SeqlensOwned::Host(v) => Seqlens::Host(v.clone()),
            SeqlensOwned::Device(t) => Seqlens::Device(t),
        }
    }
}

/// Attention forward: dense or varlen (`varlen` is `None` or `(cu_seqlens_q, cu_seqlens_kv,
/// max_seqlen_q, max_seqlen_kv)`), 16-bit or fp8 (`descales` `None` or a 3-tuple). Returns
/// the 2 output slots.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn attention<'py>(
    py: Python<'py>,
    name: &str,
    backend: &str,
    stream: &Bound<'py, PyAny>,
    alloc: Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    k: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    descales: &Bound<'py, PyAny>,
    varlen: &Bound<'py, PyAny>,
    causal: &Bound<'py, PyAny>,
    softmax_scale: &Bound<'py, PyAny>,
    num_kv_splits: &Bound<'py, PyAny>,
    kernel: &str,
    return_lse: &Bound<'py, PyAny>,
    outs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let env = env(name, backend, stream)?;
    let (causal, return_lse) = (flag(causal)?, flag(return_lse)?);
    let softmax_scale = opt_float_arg(name, "softmax_scale", softmax_scale)?;
    let (q, k, v) = (
        desc(name, "q", q)?,
        desc(name, "k", k)?,
        desc(name, "v", v)?,
    );
    let descales = if descales.is_none() {
        None
    } else {
        let (a, b, c): (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>) =
            descales.extract()?;
        Some([
            desc(name, "q_descale", &a)?,
            desc(name, "k_descale", &b)?,
            desc(name, "v_descale", &c)?,
        ])
    };
    let varlen = if varlen.is_none() {
        None
    } else {
        let (cq, ck, mq, mk): (
            Bound<'py, PyAny>,
            Bound<'py, PyAny>,
            Bound<'py, PyAny>,
            Bound<'py, PyAny>,
        ) = varlen.extract()?;
        Some((
            seqlens(name, "cu_seqlens_q", &cq)?,
            seqlens(name, "cu_seqlens_kv", &ck)?,
            int_i64(name, "max_seqlen_q", &mq)?,
            int_i64(name, "max_seqlen_kv", &mk)?,
        ))
    };
    let splits = if num_kv_splits.is_none() {
        None
    } else {
        Some(int_i64(name, "num_kv_splits", num_kv_splits)?)
    };
    let mut o = Outs::new(name, alloc, outs, &["out", "lse"])?;
    let given: Vec<Option<Tensor>> = (0..2).map(|i| o.given(i).cloned()).collect();
    let a = Attn {
        name,
        q: &q,
        k: &k,
        v: &v,
        descales: descales.as_ref().map(|[a, b, c]| [a, b, c]),
        varlen: varlen.as_ref().map(|(cq, ck, mq, mk)| Varlen {
            cu_seqlens_q: cq.view(),
            cu_seqlens_kv: ck.view(),
            max_seqlen_q: *mq,
            max_seqlen_kv: *mk,
        }),
        causal,
        softmax_scale,
        num_kv_splits: splits,
        kernel,
        return_lse,
        outs: std::array::from_fn(|i| given[i].as_ref()),
    };
    // SAFETY: as in `norm_fwd`.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        flydsl_bind::attn::attention(env, &mut o, &a)
    }));
    o.finish(py, r)
}

/// fly-gemm's host preshuffle of row-major `[n, k]` bytes of `elem_bytes`-byte elements.
#[pyfunction]
fn preshuffle_b_bytes<'py>(
    py: Python<'py>,
    b: &[u8],
    n: usize,
    k: usize,
    elem_bytes: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let r = catch_unwind(|| flydsl_bind::gemm::preshuffle_b_bytes(b, n, k, elem_bytes));
    match r {
        Ok(Ok(v)) => Ok(PyBytes::new(py, &v)),
        Ok(Err(e)) => Err(to_py(e)),
        Err(_) => Err(PyRuntimeError::new_err(
            "flydsl.preshuffle_b: internal error (a flydsl bug; please report it)",
        )),
    }
}

/// What this build contains: the package version and the GPU targets with code objects.
#[pyfunction]
fn build_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    let mut targets = Vec::new();
    if cfg!(feature = "sm90") {
        targets.push("sm90");
    }
    if cfg!(feature = "gfx942") {
        targets.push("gfx942");
    }
    if cfg!(feature = "gfx950") {
        targets.push("gfx950");
    }
    if cfg!(feature = "gfx1201") {
        targets.push("gfx1201");
    }
    if cfg!(feature = "gfx1250") {
        targets.push("gfx1250");
    }
    d.set_item("targets", targets)?;
    d.set_item("align", flydsl_bind::ALIGN)?;
    Ok(d)
}

/// The extension module.
#[pymodule]
fn _flydsl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(norm_fwd, m)?)?;
    m.add_function(wrap_pyfunction!(norm_bwd, m)?)?;
    m.add_function(wrap_pyfunction!(softmax, m)?)?;
    m.add_function(wrap_pyfunction!(softmax_backward, m)?)?;
    m.add_function(wrap_pyfunction!(gemm, m)?)?;
    m.add_function(wrap_pyfunction!(attention, m)?)?;
    m.add_function(wrap_pyfunction!(preshuffle_b_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    Ok(())
}
