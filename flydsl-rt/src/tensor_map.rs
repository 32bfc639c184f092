//! TMA tensor maps: the 128-byte descriptor an NVIDIA TMA load reads (`flydsl_ir::NvOp::TmaLoad`),
//! made on the host and kept in device memory.
//!
//! On CUDA the driver encodes it (`cuTensorMapEncodeTiled`); on the Sim it is a
//! [`flydsl_sim::SimTensorMap`]. Either way the kernel receives it as a tensor parameter
//! (`TensorMap::buffer`), and the map borrows the tensor it describes so that tensor outlives
//! every launch that uses the map.

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::repr::DeviceRepr;
use crate::types::Backend;
#[cfg(feature = "sim")]
use flydsl_sim::SimTensorMap;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// Bytes of a tensor map (CUDA's `CUtensorMap`, and the Sim's encoding of the same size).
const TENSOR_MAP_BYTES: usize = 128;
/// Most dimensions of a tensor map (CUDA's limit for tiled maps).
const TENSOR_MAP_MAX_RANK: usize = 5;
#[cfg(feature = "sim")]
const _: () = assert!(
    TENSOR_MAP_BYTES == flydsl_sim::TENSOR_MAP_BYTES
        && TENSOR_MAP_MAX_RANK == flydsl_sim::TENSOR_MAP_MAX_RANK
);

/// How a TMA box is laid out in LDS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmaSwizzle {
    /// Row-major, no swizzle.
    None,
    /// The 128-byte swizzle (`flydsl_ir::swizzle128`): the box's inner extent is at most
    /// 128 bytes and the LDS destination 1024-byte aligned.
    B128,
}

/// A tiled tensor map over a strided tensor in a [`DeviceBuffer`].
///
/// Maps are cached per process: a map's bytes depend only on (device, address, element
/// size, extents, strides, box, swizzle), so a later [`TensorMap::tiled`] with the same
/// values reuses the uploaded map instead of encoding and copying it again (a call that
/// would otherwise synchronize with the device). The cache keeps at most
/// [`TensorMap::CACHE_ENTRIES`] maps.
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, Target, TensorMap, TmaSwizzle};
/// let dev = Device::sim(Target::Sm90);
/// let a = DeviceBuffer::<flydsl_rt::half::bf16>::zeroed(&dev, 100 * 64).unwrap();
/// // 100 rows of 64 bf16, boxes of 8 rows x 64 elements, 128-byte swizzle.
/// let map = TensorMap::tiled(&a, &[64, 100], &[64], &[64, 8], TmaSwizzle::B128).unwrap();
/// assert_eq!(map.buffer().len(), 128);
/// assert_eq!(map.box_bytes(), 8 * 64 * 2);
/// // A box wider than the 128-byte swizzle is refused before anything is made.
/// assert!(TensorMap::tiled(&a, &[64, 100], &[64], &[128, 8], TmaSwizzle::B128).is_err());
/// ```
#[derive(Debug)]
pub struct TensorMap<'a, T: DeviceRepr> {
    /// The view of `map` launches get (declared first: dropped before `map`).
    view: DeviceBuffer<i8>,
    /// Keeps the map's memory (shared with the cache) alive while the view lives.
    _map: Arc<DeviceBuffer<i8>>,
    box_bytes: u64,
    _tensor: PhantomData<&'a DeviceBuffer<T>>,
}

const OP: &str = "flydsl_rt::TensorMap::tiled";

fn bad(reason: String) -> Error {
    Error::InvalidArgument {
        op: OP.to_string(),
        reason,
    }
}

impl<'a, T: DeviceRepr> TensorMap<'a, T> {
    /// A map of the tensor in `src` with extents `dims` (innermost first, 1 to 5 of them),
    /// element strides `strides` of dimensions 1.. (dimension 0 is contiguous), and boxes of
    /// `boxes` elements per dimension, landing in LDS as `swizzle` says.
    ///
    /// Checked (the TMA unit's rules): every extent in 1..=2^32, strides multiples of 16
    /// bytes below 2^40 bytes, the tensor inside `src`, boxes in 1..=256 with an inner extent
    /// that is a multiple of 16 bytes (at most 128 bytes with [`TmaSwizzle::B128`]), and
    /// the device a CUDA device or the Sim.
    pub fn tiled(
        src: &'a DeviceBuffer<T>,
        dims: &[u64],
        strides: &[u64],
        boxes: &[u32],
        swizzle: TmaSwizzle,
    ) -> Result<TensorMap<'a, T>> {
        let es = std::mem::size_of::<T>() as u64;
        let rank = dims.len();
        if !(1..=TENSOR_MAP_MAX_RANK).contains(&rank) {
            return Err(bad(format!("dims has {rank} extents: use 1 to 5")));
        }
        if strides.len() != rank - 1 || boxes.len() != rank {
            return Err(bad(format!(
                "a rank-{rank} map takes {} strides and {rank} box extents; got {} and {}",
                rank - 1,
                strides.len(),
                boxes.len()
            )));
        }
        if let Some(d) = dims.iter().find(|&&d| !(1..=1u64 << 32).contains(&d)) {
            return Err(bad(format!("extent {d} is outside 1..=2^32")));
        }
        let mut byte_strides = [0u64; TENSOR_MAP_MAX_RANK];
        byte_strides[0] = es;
        for (i, &s) in strides.iter().enumerate() {
            let b = s.checked_mul(es).filter(|b| b % 16 == 0 && *b < 1 << 40);
            let Some(b) = b else {
                return Err(bad(format!(
                    "stride {s} of dimension {} is not a multiple of 16 bytes below 2^40 \
                     bytes: pad the rows",
                    i + 1
                )));
            };
            byte_strides[i + 1] = b;
        }
        // The last element must lie inside the buffer.
        let mut last = es;
        for i in 0..rank {
            last = (dims[i] - 1)
                .checked_mul(byte_strides[i])
                .and_then(|x| x.checked_add(last))
                .ok_or_else(|| bad("the tensor's extent overflows u64".into()))?;
        }
        if last > src.size_bytes() {
            return Err(bad(format!(
                "dims {dims:?} with strides {strides:?} reach byte {last}, past the buffer's {} \
                 bytes",
                src.size_bytes()
            )));
        }
        if let Some(b) = boxes.iter().find(|&&b| !(1..=256).contains(&b)) {
            return Err(bad(format!("box extent {b} is outside 1..=256")));
        }
        let inner = boxes[0] as u64 * es;
        let max_inner = if swizzle == TmaSwizzle::B128 {
            128
        } else {
            u64::MAX
        };
        if !inner.is_multiple_of(16) || inner > max_inner {
            return Err(bad(format!(
                "the box's inner extent is {inner} bytes: use a multiple of 16 bytes{}",
                if swizzle == TmaSwizzle::B128 {
                    ", at most 128 with the 128-byte swizzle"
                } else {
                    ""
                }
            )));
        }
        if !src.as_device_ptr().is_multiple_of(16) {
            return Err(bad("the tensor's address is not 16-byte aligned".into()));
        }
        let box_bytes = boxes.iter().map(|&b| b as u64).product::<u64>() * es;
        let key = MapKey {
            device: src.device_id(),
            base: src.as_device_ptr(),
            elem_bytes: es,
            dims: dims.to_vec(),
            strides: byte_strides,
            boxes: boxes.to_vec(),
            swizzle,
        };
        let cache = CACHE.get_or_init(Default::default);
        if let Some(map) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(TensorMap::with(map, src, box_bytes));
        }
        let bytes: [u8; TENSOR_MAP_BYTES] = match src.device().backend() {
            Backend::Cuda => crate::backend::cuda::encode_tensor_map(
                src.as_device_ptr(),
                es as u32,
                dims,
                &byte_strides[1..rank],
                boxes,
                swizzle == TmaSwizzle::B128,
            )?,
            #[cfg(feature = "sim")]
            Backend::Sim => {
                let mut m = SimTensorMap {
                    base: src.as_device_ptr(),
                    elem_bytes: es as u32,
                    rank: rank as u32,
                    dims: [1; TENSOR_MAP_MAX_RANK],
                    strides: byte_strides,
                    boxes: [1; TENSOR_MAP_MAX_RANK],
                    swizzle128: swizzle == TmaSwizzle::B128,
                };
                m.dims[..rank].copy_from_slice(dims);
                m.boxes[..rank].copy_from_slice(boxes);
                m.encode()
            }
            other => {
                return Err(bad(format!(
                    "tensor maps are an NVIDIA TMA feature; the device is {other}"
                )))
            }
        };
        let map = Arc::new(DeviceBuffer::from_slice(
            src.device(),
            &bytes.map(|b| b as i8),
        )?);
        if let Ok(mut c) = cache.lock() {
            if c.len() >= Self::CACHE_ENTRIES {
                // Evict everything: in-flight maps stay alive through their Arc.
                c.clear();
            }
            c.insert(key, map.clone());
        }
        Ok(TensorMap::with(map, src, box_bytes))
    }

    /// A map of `src` held in `map`: the kernel's parameter is a view of `map` that carries
    /// both `map`'s and `src`'s stream ordering into every launch it is pushed to
    /// (`residency.rs`), since the kernel reads `src` through the map.
    fn with(map: Arc<DeviceBuffer<i8>>, src: &'a DeviceBuffer<T>, box_bytes: u64) -> Self {
        let links = vec![Arc::clone(map.residency()), Arc::clone(src.residency())];
        // SAFETY: the view covers `map`'s memory exactly, and `map` (kept next to it) outlives
        // it; the view never frees.
        let view = unsafe { DeviceBuffer::linked_view(&map, links) };
        TensorMap {
            _map: map,
            view,
            box_bytes,
            _tensor: PhantomData,
        }
    }

    /// Most maps the process-wide cache keeps.
    pub const CACHE_ENTRIES: usize = 256;

    /// The 128-byte map in device memory: pass it as the kernel's tensor-map parameter (an
    /// `i8` tensor).
    pub fn buffer(&self) -> &DeviceBuffer<i8> {
        &self.view
    }

    /// Bytes one box moves (what a TMA load of it signals on its mbarrier).
    pub fn box_bytes(&self) -> u64 {
        self.box_bytes
    }
}

/// What a map's bytes depend on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct MapKey {
    device: crate::types::DeviceId,
    base: u64,
    elem_bytes: u64,
    dims: Vec<u64>,
    strides: [u64; TENSOR_MAP_MAX_RANK],
    boxes: Vec<u32>,
    swizzle: TmaSwizzle,
}

type Cache = Mutex<HashMap<MapKey, Arc<DeviceBuffer<i8>>>>;
static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
