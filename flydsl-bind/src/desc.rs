//! What a caller hands the binding: tensors as plain values ([`Tensor`]: device address,
//! shape, strides, dtype name, device name and index, as a framework reports them) and the
//! backend and stream to run on ([`Env`]).

use flydsl_rt::Target;

/// The element types the kernels read or write, named as torch names them.
///
/// ```
/// use flydsl_bind::Dtype;
/// assert_eq!(Dtype::parse("torch.bfloat16"), Some(Dtype::BF16));
/// assert_eq!(Dtype::parse("float8_e4m3fn"), Some(Dtype::F8E4M3FN));
/// assert_eq!(Dtype::parse("torch.complex64"), None);
/// assert_eq!((Dtype::F16.name(), Dtype::F16.size()), ("float16", 2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// `torch.float32`.
    F32,
    /// `torch.float16`.
    F16,
    /// `torch.bfloat16`.
    BF16,
    /// `torch.int8`.
    I8,
    /// `torch.int32`.
    I32,
    /// `torch.float8_e4m3fn` (OCP fp8).
    F8E4M3FN,
    /// `torch.float8_e4m3fnuz` (AMD fp8 FNUZ, gfx942).
    F8E4M3FNUZ,
}

impl Dtype {
    /// Every dtype.
    pub const ALL: [Dtype; 7] = [
        Dtype::F32,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I8,
        Dtype::I32,
        Dtype::F8E4M3FN,
        Dtype::F8E4M3FNUZ,
    ];

    /// The dtype torch writes as `torch.<name>` (the `torch.` prefix is optional).
    pub fn parse(s: &str) -> Option<Dtype> {
        let s = s.strip_prefix("torch.").unwrap_or(s);
        Dtype::ALL.into_iter().find(|d| d.name() == s)
    }

    /// torch's name without the `torch.` prefix.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
            Dtype::BF16 => "bfloat16",
            Dtype::I8 => "int8",
            Dtype::I32 => "int32",
            Dtype::F8E4M3FN => "float8_e4m3fn",
            Dtype::F8E4M3FNUZ => "float8_e4m3fnuz",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
            Dtype::I8 | Dtype::F8E4M3FN | Dtype::F8E4M3FNUZ => 1,
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "torch.{}", self.name())
    }
}

/// A tensor as a framework describes it, unchecked: the binding's validation
/// ([`crate::Call::input`]) turns it into a [`crate::View`] or a clear error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// Device address of the first element (`tensor.data_ptr()`; includes the storage offset).
    pub ptr: u64,
    /// Sizes (`tensor.shape`).
    pub shape: Vec<i64>,
    /// Strides in elements (`tensor.stride()`).
    pub strides: Vec<i64>,
    /// The dtype as the framework prints it (`str(tensor.dtype)`, e.g. `torch.bfloat16`).
    pub dtype: String,
    /// The device type (`tensor.device.type`: `cuda` for NVIDIA and for ROCm builds of torch;
    /// `sim` for the Sim, which only Rust callers use).
    pub device: String,
    /// The device index (`tensor.device.index`).
    pub index: Option<i64>,
}

impl Tensor {
    /// A contiguous row-major tensor of `shape` at `ptr` on `device` `index`.
    ///
    /// ```
    /// let t = flydsl_bind::Tensor::contiguous(0x1000, &[2, 3], "torch.float32", "cuda", Some(0));
    /// assert_eq!(t.strides, vec![3, 1]);
    /// ```
    pub fn contiguous(
        ptr: u64,
        shape: &[i64],
        dtype: &str,
        device: &str,
        index: Option<i64>,
    ) -> Tensor {
        let mut strides = vec![1i64; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].saturating_mul(shape[d + 1].max(1));
        }
        Tensor {
            ptr,
            shape: shape.to_vec(),
            strides,
            dtype: dtype.to_string(),
            device: device.to_string(),
            index,
        }
    }
}

/// The GPU API whose memory and streams the tensors belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gpu {
    /// NVIDIA through the CUDA driver (torch's `cuda` device on a CUDA build).
    Cuda,
    /// AMD through HIP (torch's `cuda` device on a ROCm build, where `torch.version.hip` is
    /// set).
    Hip,
    /// The CPU simulator emulating `target` (tensors are Sim allocations, device type `sim`;
    /// for tests of the binding without a GPU).
    Sim(Target),
}

impl Gpu {
    /// The device type tensors of this API report (`cuda` for both GPU APIs, as torch does).
    pub fn device_type(self) -> &'static str {
        match self {
            Gpu::Cuda | Gpu::Hip => "cuda",
            Gpu::Sim(_) => "sim",
        }
    }
}

/// Where a call runs: the GPU API and the raw stream handle (`CUstream` / `hipStream_t`, e.g.
/// `torch.cuda.current_stream().cuda_stream`; 0 is the legacy default stream; ignored on
/// the Sim).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Env {
    /// The API.
    pub gpu: Gpu,
    /// The stream handle.
    pub stream: u64,
}
