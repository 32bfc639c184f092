//! One binding call: validation of every tensor (dtype, device, contiguity, size, alignment),
//! allocation of the outputs the caller left out, the no-overlap rule for outputs, and then
//! the device, the stream and the wrapped buffers ([`Ctx`]).

use crate::desc::{Dtype, Env, Gpu, Tensor};
use crate::error::{BindError, ErrorKind, Result};
use flydsl_rt::{Backend, Device, DeviceBuffer, DeviceRepr, Stream};
use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};

/// Every tensor's first element must sit at a multiple of this many bytes: the kernels read
/// and write 16-byte vectors and TMA needs 16-byte aligned bases. torch's allocations are
/// 512-byte aligned; a view that starts inside a row may not be.
pub const ALIGN: u64 = 16;

/// Makes the outputs a caller did not pass (the Python package: `torch.empty` on the inputs'
/// device).
pub trait Alloc {
    /// A new contiguous tensor of `shape` and `dtype` on device `index` of the call's device
    /// type, for output slot `slot` of the call.
    fn alloc(
        &mut self,
        slot: usize,
        shape: &[usize],
        dtype: Dtype,
        index: Option<i64>,
    ) -> Result<Tensor>;
}

/// An [`Alloc`] that refuses: every output must be passed.
#[derive(Debug, Default)]
pub struct NoAlloc;

impl Alloc for NoAlloc {
    fn alloc(&mut self, slot: usize, _: &[usize], _: Dtype, _: Option<i64>) -> Result<Tensor> {
        Err(BindError::new(
            ErrorKind::Value,
            format!("output slot {slot} was not passed and this caller allocates nothing"),
        ))
    }
}

/// A tensor that passed validation: contiguous, of a known dtype, on the call's device,
/// aligned, with its element count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The argument's name (as the Python function names it).
    pub arg: &'static str,
    /// Device address.
    pub ptr: u64,
    /// Sizes.
    pub shape: Vec<usize>,
    /// Elements.
    pub numel: usize,
    /// Element type.
    pub dtype: Dtype,
}

impl View {
    /// Bytes.
    pub fn bytes(&self) -> u64 {
        self.numel as u64 * self.dtype.size() as u64
    }
    /// The last dimension (1 for a 0-d tensor).
    pub fn last(&self) -> usize {
        self.shape.last().copied().unwrap_or(1)
    }
    /// The sizes before the last dimension.
    pub fn leading(&self) -> &[usize] {
        &self.shape[..self.shape.len().saturating_sub(1)]
    }
}

/// Formats a shape as torch prints sizes: `[2, 3]`.
pub(crate) fn shape_str<T: Display>(s: &[T]) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// "a, b or c".
fn one_of(ds: &[Dtype]) -> String {
    let names: Vec<String> = ds.iter().map(|d| d.to_string()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The checks and outputs of one call of the public function `op` (e.g. `flydsl.rms_norm`).
pub struct Call<'a> {
    op: String,
    env: Env,
    alloc: &'a mut dyn Alloc,
    /// The first tensor's device (type, index) and argument name.
    place: Option<(String, Option<i64>, &'static str)>,
    /// Every validated tensor's byte range and whether it is written.
    ranges: Vec<(&'static str, u64, u64, bool)>,
}

impl<'a> Call<'a> {
    /// The checks of a call of `flydsl.<name>` in `env`, allocating left-out outputs with
    /// `alloc`.
    pub fn new(name: &str, env: Env, alloc: &'a mut dyn Alloc) -> Call<'a> {
        Call {
            op: format!("flydsl.{name}"),
            env,
            alloc,
            place: None,
            ranges: Vec::new(),
        }
    }

    /// The public function's name.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The error "op: `arg` = value: rule; fix".
    pub fn error(
        &self,
        kind: ErrorKind,
        arg: &str,
        value: impl Display,
        rule: impl Display,
        fix: impl Display,
    ) -> BindError {
        BindError::new(
            kind,
            format!("{}: `{arg}` = {value}: {rule}; {fix}", self.op),
        )
    }

    /// A `Value` error (see [`Call::error`]).
    pub fn value_error(
        &self,
        arg: &str,
        value: impl Display,
        rule: impl Display,
        fix: impl Display,
    ) -> BindError {
        self.error(ErrorKind::Value, arg, value, rule, fix)
    }

    /// A runtime-crate error of this call.
    pub fn rt(&self, e: flydsl_rt::Error) -> BindError {
        BindError::from_rt(&self.op, e)
    }

    /// Validate input `arg`: a dtype of `dtypes`, on the call's device, contiguous, aligned.
    pub fn input(&mut self, arg: &'static str, t: &Tensor, dtypes: &[Dtype]) -> Result<View> {
        self.check(arg, t, dtypes, false)
    }

    /// [`Call::input`] of an optional tensor.
    pub fn opt_input(
        &mut self,
        arg: &'static str,
        t: Option<&Tensor>,
        dtypes: &[Dtype],
    ) -> Result<Option<View>> {
        t.map(|t| self.input(arg, t, dtypes)).transpose()
    }

    /// Output `arg` in slot `slot`: the caller's tensor `given`, which must have exactly
    /// `shape` and `dtype` (and pass the input checks), or a new one from the allocator.
    pub fn output(
        &mut self,
        arg: &'static str,
        slot: usize,
        given: Option<&Tensor>,
        shape: &[usize],
        dtype: Dtype,
    ) -> Result<View> {
        let allocated;
        let t = match given {
            Some(t) => t,
            None => {
                let index = self.place.as_ref().and_then(|p| p.1);
                allocated = self.alloc.alloc(slot, shape, dtype, index)?;
                &allocated
            }
        };
        let v = self.check(arg, t, &[dtype], true)?;
        if v.shape != shape {
            return Err(self.value_error(
                arg,
                format_args!("a tensor of shape {}", shape_str(&v.shape)),
                format_args!("{} writes `{arg}` of shape {}", self.op, shape_str(shape)),
                format_args!("pass `{arg}` of shape {} or leave it out", shape_str(shape)),
            ));
        }
        Ok(v)
    }

    fn check(
        &mut self,
        arg: &'static str,
        t: &Tensor,
        dtypes: &[Dtype],
        out: bool,
    ) -> Result<View> {
        let dtype = match Dtype::parse(&t.dtype) {
            Some(d) if dtypes.contains(&d) => d,
            _ => {
                return Err(self.error(
                    ErrorKind::Type,
                    arg,
                    format_args!("a tensor of dtype {}", t.dtype),
                    format_args!("`{arg}` must be {}", one_of(dtypes)),
                    format_args!("convert it with `.to({})`", dtypes[0]),
                ))
            }
        };
        self.check_device(arg, t)?;
        if t.shape.len() != t.strides.len() {
            return Err(self.value_error(
                arg,
                format_args!(
                    "a tensor of shape {} and strides {}",
                    shape_str(&t.shape),
                    shape_str(&t.strides)
                ),
                "the shape and the strides must have one entry per dimension",
                "pass a torch tensor",
            ));
        }
        let mut shape = Vec::with_capacity(t.shape.len());
        for &d in &t.shape {
            match usize::try_from(d) {
                Ok(d) => shape.push(d),
                Err(_) => {
                    return Err(self.value_error(
                        arg,
                        format_args!("a tensor of shape {}", shape_str(&t.shape)),
                        "sizes must be non-negative",
                        "pass a torch tensor",
                    ))
                }
            }
        }
        let numel = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| (n as u64).checked_mul(dtype.size() as u64).is_some());
        let Some(numel) = numel else {
            return Err(self.value_error(
                arg,
                format_args!("a tensor of shape {}", shape_str(&t.shape)),
                "its size in bytes overflows 64 bits",
                "pass a smaller tensor",
            ));
        };
        if numel > 0 && !contiguous(&shape, &t.strides) {
            return Err(self.value_error(
                arg,
                format_args!(
                    "a tensor of shape {} with strides {}",
                    shape_str(&t.shape),
                    shape_str(&t.strides)
                ),
                format_args!("{} takes contiguous (row-major) tensors only", self.op),
                format_args!("pass `{arg}.contiguous()`"),
            ));
        }
        let bytes = numel as u64 * dtype.size() as u64;
        if numel > 0 {
            if t.ptr == 0 {
                return Err(self.value_error(
                    arg,
                    "a tensor at address 0",
                    "a tensor with elements has a non-null data_ptr()",
                    "pass a torch tensor",
                ));
            }
            if !t.ptr.is_multiple_of(ALIGN) {
                return Err(self.value_error(
                    arg,
                    format_args!("a tensor at address {:#x}", t.ptr),
                    format_args!(
                        "its data_ptr() must be a multiple of {ALIGN} bytes (the kernels read \
                         16-byte vectors; a view starting inside a row is not aligned)"
                    ),
                    format_args!("pass `{arg}.clone()` (a fresh allocation is aligned)"),
                ));
            }
            if t.ptr.checked_add(bytes).is_none() {
                return Err(self.value_error(
                    arg,
                    format_args!("a tensor at address {:#x} of {bytes} bytes", t.ptr),
                    "its end overflows the address space",
                    "pass a torch tensor",
                ));
            }
            self.ranges.push((arg, t.ptr, t.ptr + bytes, out));
        }
        Ok(View {
            arg,
            ptr: t.ptr,
            shape,
            numel,
            dtype,
        })
    }

    fn check_device(&mut self, arg: &'static str, t: &Tensor) -> Result<()> {
        let want = self.env.gpu.device_type();
        let here = match t.index {
            Some(i) => format!("{}:{i}", t.device),
            None => t.device.clone(),
        };
        if t.device != want {
            let fix = match self.env.gpu {
                Gpu::Sim(_) => "pass a Sim tensor".to_string(),
                _ => format!("move it with `{arg}.cuda()`"),
            };
            return Err(self.value_error(
                arg,
                format_args!("a tensor on {here}"),
                format_args!("{} runs on {want} tensors", self.op),
                fix,
            ));
        }
        if !matches!(self.env.gpu, Gpu::Sim(_)) {
            match t.index {
                Some(i) if i >= 0 => {}
                _ => {
                    return Err(self.value_error(
                        arg,
                        format_args!("a tensor on {here}"),
                        "a GPU tensor has a non-negative device index",
                        "pass a torch tensor",
                    ))
                }
            }
        }
        match &self.place {
            None => {
                self.place = Some((t.device.clone(), t.index, arg));
                Ok(())
            }
            Some((dev, index, first)) if (dev, index) != (&t.device, &t.index) => {
                let there = match index {
                    Some(i) => format!("{dev}:{i}"),
                    None => dev.clone(),
                };
                Err(self.value_error(
                    arg,
                    format_args!("a tensor on {here}"),
                    format_args!(
                        "`{first}` is on {there}; every tensor of a call must be on one device"
                    ),
                    format_args!("move `{arg}` to {there}"),
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// The shape rule "`arg` must have shape `want`" (`why` says where `want` comes from).
    pub fn expect_shape(&self, v: &View, want: &[usize], why: &str) -> Result<()> {
        if v.shape == want {
            return Ok(());
        }
        Err(self.value_error(
            v.arg,
            format_args!("a tensor of shape {}", shape_str(&v.shape)),
            format_args!("`{}` must have shape {} ({why})", v.arg, shape_str(want)),
            format_args!("pass `{}` of shape {}", v.arg, shape_str(want)),
        ))
    }

    /// The element-count rule "`arg` must have `want` elements".
    pub fn expect_numel(&self, v: &View, want: usize, why: &str) -> Result<()> {
        if v.numel == want {
            return Ok(());
        }
        Err(self.value_error(
            v.arg,
            format_args!(
                "a tensor of shape {} ({} elements)",
                shape_str(&v.shape),
                v.numel
            ),
            format_args!("`{}` must have {want} elements ({why})", v.arg),
            format_args!("pass `{}` of {want} elements", v.arg),
        ))
    }

    /// The rank rule "`arg` must have `ndim` dimensions (`layout`)".
    pub fn expect_ndim(&self, v: &View, ndim: usize, layout: &str) -> Result<()> {
        if v.shape.len() == ndim {
            return Ok(());
        }
        Err(self.value_error(
            v.arg,
            format_args!("a tensor of shape {}", shape_str(&v.shape)),
            format_args!("`{}` must have {ndim} dimensions ({layout})", v.arg),
            format_args!("reshape `{}` to {layout}", v.arg),
        ))
    }

    /// The "at least one dimension" rule.
    pub fn expect_rows(&self, v: &View, what: &str) -> Result<()> {
        if v.shape.is_empty() {
            return Err(self.value_error(
                v.arg,
                "a 0-d tensor",
                format_args!("`{}` must have at least one dimension ({what})", v.arg),
                format_args!("pass `{}.reshape(1, -1)`", v.arg),
            ));
        }
        Ok(())
    }

    /// Ends validation: no output overlaps another tensor of the call; then the device and
    /// the stream.
    pub fn finish(self) -> Result<Ctx> {
        for (i, &(a, s, e, out)) in self.ranges.iter().enumerate() {
            for (j, &(b, s2, e2, _)) in self.ranges.iter().enumerate() {
                if i != j && out && s < e2 && s2 < e {
                    return Err(self.value_error(
                        a,
                        format_args!("a tensor at [{s:#x}, {e:#x})"),
                        format_args!(
                            "it overlaps `{b}` at [{s2:#x}, {e2:#x}); {} writes its outputs out \
                             of place",
                            self.op
                        ),
                        format_args!("pass `{a}` in memory separate from `{b}`"),
                    ));
                }
            }
        }
        let index = self.place.as_ref().and_then(|p| p.1).unwrap_or(0);
        let ordinal = usize::try_from(index).unwrap_or(0);
        let stream = stream(self.env, ordinal).map_err(|e| BindError::from_rt(&self.op, e))?;
        Ok(Ctx {
            op: self.op,
            stream,
        })
    }
}

/// torch's rule: the strides of every dimension of size other than 1 are the row-major ones.
///
/// ```
/// use flydsl_bind::contiguous;
/// assert!(contiguous(&[2, 3], &[3, 1]));
/// assert!(contiguous(&[2, 1, 3], &[3, 99, 1])); // a size-1 dim's stride does not matter
/// assert!(!contiguous(&[2, 3], &[1, 2])); // transposed
/// assert!(!contiguous(&[2, 3], &[6, 1])); // every other row
/// ```
pub fn contiguous(shape: &[usize], strides: &[i64]) -> bool {
    let mut want: i64 = 1;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d != 1 && s != want {
            return false;
        }
        want = want.saturating_mul(d as i64);
    }
    true
}

/// The cached stream of `(env, ordinal)`: one `Stream` per raw handle, so kernel crates that
/// remember the stream of their last call (fly-norm's backward workspace) see one stream, not
/// a new one per call.
fn stream(env: Env, ordinal: usize) -> flydsl_rt::Result<Arc<Stream>> {
    type Key = (Gpu, usize, u64);
    static CACHE: Mutex<Option<HashMap<Key, Arc<Stream>>>> = Mutex::new(None);
    let key = (env.gpu, ordinal, env.stream);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(s) = cache.get(&key) {
        return Ok(Arc::clone(s));
    }
    let raw = env.stream as usize as *mut std::ffi::c_void;
    let s = match env.gpu {
        Gpu::Cuda => {
            let dev = Device::new(Backend::Cuda, ordinal)?;
            // SAFETY: the caller's contract (`crate` docs): `raw` is a live stream of this
            // device's primary context (torch's current stream, which torch never destroys)
            // that outlives the process's use of flydsl.
            unsafe { Stream::from_raw_cuda(&dev, raw) }?
        }
        Gpu::Hip => {
            let dev = Device::new(Backend::Hip, ordinal)?;
            // SAFETY: as above, for a `hipStream_t` of this device.
            unsafe { Stream::from_raw_hip(&dev, raw) }?
        }
        Gpu::Sim(t) => Device::sim(t).stream()?,
    };
    let s = Arc::new(s);
    cache.insert(key, Arc::clone(&s));
    Ok(s)
}

/// A validated call's stream, to wrap its tensors as buffers on.
pub struct Ctx {
    op: String,
    stream: Arc<Stream>,
}

impl Ctx {
    /// The public function's name.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The stream.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// A runtime-crate error of this call.
    pub fn rt(&self, e: flydsl_rt::Error) -> BindError {
        BindError::from_rt(&self.op, e)
    }

    /// The memory of `v` as a borrowed buffer of `T` on the call's stream (never freed by
    /// us).
    ///
    /// # Safety
    /// `v` describes device memory of the call's device holding `v.numel` valid values of `T`
    /// that stays allocated until the work this call enqueues on the stream has run, whose
    /// earlier writes by other code are ordered before the stream's current end, and which
    /// no other code writes while the call's work runs (the contract of
    /// [`DeviceBuffer::from_raw_parts`]; the crate docs say what a torch caller guarantees).
    pub unsafe fn buf<T: DeviceRepr>(&self, v: &View) -> Result<DeviceBuffer<T>> {
        if std::mem::size_of::<T>() != v.dtype.size() {
            return Err(BindError::new(
                ErrorKind::Runtime,
                format!(
                    "{}: `{}` of {} wrapped as {:?} (a flydsl-bind bug)",
                    self.op,
                    v.arg,
                    v.dtype,
                    T::SCALAR
                ),
            ));
        }
        // SAFETY: the caller's contract above; the size of `T` is that of the dtype.
        unsafe { DeviceBuffer::<T>::from_raw_parts(&self.stream, v.ptr, v.numel) }
            .map_err(|e| self.rt(e))
    }
}
