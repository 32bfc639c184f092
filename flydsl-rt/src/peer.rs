//! Memory that other devices and other processes reach: peer access between devices of one
//! process ([`Device::enable_peer_access`]), [`SharedMemory`] allocations, and their
//! [`IpcHandle`]s, which another process opens with [`SharedMemory::open_ipc`].
//!
//! Backends: CUDA (`cuCtxEnablePeerAccess`, `cuMemAlloc`, `cuIpc*MemHandle`) and the Sim
//! (Sim devices of one process: peer access lets a device's kernels reach another Sim
//! device's memory through its ordinary addresses; an IPC handle names the memory and the
//! address, so the one-process-per-GPU code path runs on Sim devices of one process too).
//! HIP: not implemented yet, an [`Error::InvalidArgument`] that says so.

use crate::backend::RawDevice;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::types::Backend;

fn invalid(op: &str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op: op.to_string(),
        reason: reason.into(),
    }
}

fn hip_missing(op: &str) -> Error {
    invalid(
        op,
        "peer access, shareable memory and IPC handles are not implemented for HIP in \
         flydsl-rt yet; use the CUDA or Sim backend",
    )
}

impl Device {
    /// Let this device's kernels read and write `peer`'s [`SharedMemory`] (both devices of
    /// one backend; enabling twice, or a device for itself, is no error).
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// let (a, b) = (Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90));
    /// a.enable_peer_access(&b).unwrap();
    /// ```
    pub fn enable_peer_access(&self, peer: &Device) -> Result<()> {
        const OP: &str = "Device::enable_peer_access";
        if self == peer {
            return Ok(());
        }
        match (&self.inner.raw, &peer.inner.raw) {
            (RawDevice::Sim(a), RawDevice::Sim(b)) => a.enable_peer(b.memory_id()),
            #[cfg(feature = "cuda")]
            (RawDevice::Cuda(a), RawDevice::Cuda(b)) => a.enable_peer(b),
            (RawDevice::Hip(_), RawDevice::Hip(_)) => Err(hip_missing(OP)),
            _ => Err(invalid(
                OP,
                format!(
                    "{} and {} are devices of different backends; pass two devices of one \
                     backend",
                    self.label(),
                    peer.label()
                ),
            )),
        }
    }
}

/// Magic of an [`IpcHandle`]'s bytes.
const MAGIC: &[u8; 7] = b"FLYIPC1";

/// A handle to a [`SharedMemory`] that another process (or device) opens with
/// [`SharedMemory::open_ipc`]: plain bytes, to exchange however the caller likes.
///
/// ```
/// use flydsl_rt::{Device, IpcHandle, SharedMemory, Target};
/// let m = SharedMemory::zeroed(&Device::new_sim(Target::Sm90), 256).unwrap();
/// let bytes = m.ipc_handle().unwrap().to_bytes().to_vec();
/// let h = IpcHandle::from_bytes(&bytes).unwrap();
/// assert_eq!(h.len_bytes(), 256);
/// assert!(IpcHandle::from_bytes(&bytes[..5]).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpcHandle {
    bytes: Vec<u8>,
}

impl IpcHandle {
    /// Byte 7: the backend; bytes 8..16: the size; then the backend's payload.
    fn new(backend: Backend, len: u64, payload: &[u8]) -> IpcHandle {
        let mut bytes = MAGIC.to_vec();
        bytes.push(match backend {
            Backend::Sim => 0,
            Backend::Cuda => 1,
            Backend::Hip => 2,
        });
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(payload);
        IpcHandle { bytes }
    }

    /// The handle as bytes.
    pub fn to_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A handle from bytes that [`to_bytes`](Self::to_bytes) gave (checked for form only:
    /// the backend validates the rest when it is opened).
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcHandle> {
        let ok = bytes.len() >= 16 && &bytes[..7] == MAGIC && bytes[7] <= 2;
        if !ok {
            return Err(invalid(
                "IpcHandle::from_bytes",
                format!(
                    "{} bytes do not start like a flydsl IPC handle; pass the bytes of \
                     IpcHandle::to_bytes unchanged",
                    bytes.len()
                ),
            ));
        }
        Ok(IpcHandle {
            bytes: bytes.to_vec(),
        })
    }

    /// The backend of the memory.
    pub fn backend(&self) -> Backend {
        match self.bytes[7] {
            0 => Backend::Sim,
            1 => Backend::Cuda,
            _ => Backend::Hip,
        }
    }

    /// The size of the shared memory in bytes.
    pub fn len_bytes(&self) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.bytes[8..16]);
        u64::from_le_bytes(w)
    }

    fn payload(&self) -> &[u8] {
        &self.bytes[16..]
    }
}

/// Whether a [`SharedMemory`] was allocated here or mapped from a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Allocated,
    Opened,
}

/// Device memory that peers (after [`Device::enable_peer_access`]) and other processes
/// (through its [`IpcHandle`]) can reach: a plain allocation, not from the stream-ordered
/// pool `DeviceBuffer` uses (which neither peer access nor IPC reach), zeroed at allocation.
/// Allocate it once at set-up: allocation and drop synchronize the device.
///
/// It is raw memory: kernels get its address ([`device_ptr`](Self::device_ptr)) through
/// [`KernelArgs::raw_tensor`](crate::KernelArgs::raw_tensor), and typed views of memory
/// allocated here come from [`DeviceBuffer::from_raw_parts`](crate::DeviceBuffer::from_raw_parts).
///
/// ```
/// use flydsl_rt::{Device, SharedMemory, Target};
/// let (a, b) = (Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90));
/// let m = SharedMemory::zeroed(&a, 64).unwrap();
/// // The one-process-per-GPU path: b opens a's memory from its handle's bytes.
/// let peer = SharedMemory::open_ipc(&b, &m.ipc_handle().unwrap()).unwrap();
/// assert_eq!((peer.device_ptr(), peer.len_bytes()), (m.device_ptr(), 64));
/// ```
#[derive(Debug)]
pub struct SharedMemory {
    device: Device,
    ptr: u64,
    bytes: u64,
    origin: Origin,
}

impl SharedMemory {
    /// `bytes` (> 0) of zeroed shareable memory on `device`.
    pub fn zeroed(device: &Device, bytes: u64) -> Result<SharedMemory> {
        const OP: &str = "SharedMemory::zeroed";
        if bytes == 0 {
            return Err(invalid(OP, "`bytes` is 0; ask for at least one byte"));
        }
        let ptr = match &device.inner.raw {
            RawDevice::Sim(d) => d.alloc(bytes)?,
            #[cfg(feature = "cuda")]
            RawDevice::Cuda(d) => {
                let n = usize::try_from(bytes).map_err(|_| Error::SizeOverflow {
                    len: bytes,
                    elem_bytes: 1,
                })?;
                d.alloc_shareable(n)?
            }
            #[cfg(not(feature = "cuda"))]
            RawDevice::Cuda(d) => match *d {},
            RawDevice::Hip(_) => return Err(hip_missing(OP)),
        };
        Ok(SharedMemory {
            device: device.clone(),
            ptr,
            bytes,
            origin: Origin::Allocated,
        })
    }

    /// The handle another process (or device) opens this memory with.
    pub fn ipc_handle(&self) -> Result<IpcHandle> {
        const OP: &str = "SharedMemory::ipc_handle";
        if self.origin == Origin::Opened {
            return Err(invalid(
                OP,
                "this memory was itself opened from a handle; pass the original owner's handle on",
            ));
        }
        match &self.device.inner.raw {
            RawDevice::Sim(d) => {
                let mut p = d.memory_id().to_le_bytes().to_vec();
                p.extend_from_slice(&self.ptr.to_le_bytes());
                Ok(IpcHandle::new(Backend::Sim, self.bytes, &p))
            }
            #[cfg(feature = "cuda")]
            RawDevice::Cuda(d) => Ok(IpcHandle::new(
                Backend::Cuda,
                self.bytes,
                &d.ipc_handle(self.ptr)?,
            )),
            #[cfg(not(feature = "cuda"))]
            RawDevice::Cuda(d) => match *d {},
            RawDevice::Hip(_) => Err(hip_missing(OP)),
        }
    }

    /// Map the memory `handle` names on `device` (CUDA: memory of another process; opening
    /// a handle of this process fails there, use peer access instead. Sim: any live Sim
    /// device's memory). Dropping the result unmaps it.
    pub fn open_ipc(device: &Device, handle: &IpcHandle) -> Result<SharedMemory> {
        const OP: &str = "SharedMemory::open_ipc";
        if handle.backend() != device.backend() {
            return Err(invalid(
                OP,
                format!(
                    "the handle is of a {} allocation but {} is a {} device; open it on a \
                     device of the same backend",
                    handle.backend(),
                    device.label(),
                    device.backend()
                ),
            ));
        }
        let p = handle.payload();
        let bad = || invalid(OP, format!("the handle's payload has {} bytes", p.len()));
        let ptr = match &device.inner.raw {
            RawDevice::Sim(d) => {
                if p.len() != 16 {
                    return Err(bad());
                }
                let word = |i: usize| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&p[i..i + 8]);
                    u64::from_le_bytes(w)
                };
                d.enable_peer(word(0))?;
                word(8)
            }
            #[cfg(feature = "cuda")]
            RawDevice::Cuda(d) => {
                let h: &[u8; crate::backend::cuda_peer::IPC_HANDLE_BYTES] =
                    p.try_into().map_err(|_| bad())?;
                d.ipc_open(h)?
            }
            #[cfg(not(feature = "cuda"))]
            RawDevice::Cuda(d) => match *d {},
            RawDevice::Hip(_) => return Err(hip_missing(OP)),
        };
        Ok(SharedMemory {
            device: device.clone(),
            ptr,
            bytes: handle.len_bytes(),
            origin: Origin::Opened,
        })
    }

    /// The device address (valid on [`device`](Self::device) and on its peers).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    /// The device it was allocated or opened on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether it was mapped from an [`IpcHandle`] (else allocated here).
    pub fn is_opened(&self) -> bool {
        self.origin == Origin::Opened
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        let r = match (&self.device.inner.raw, self.origin) {
            (RawDevice::Sim(d), Origin::Allocated) => d.free(self.ptr),
            (RawDevice::Sim(_), Origin::Opened) => Ok(()),
            #[cfg(feature = "cuda")]
            (RawDevice::Cuda(d), o) => d.synchronize().and_then(|()| match o {
                // SAFETY: ours, freed once, after the device finished every use.
                Origin::Allocated => unsafe { d.free_shareable(self.ptr) },
                // SAFETY: as above, for the mapping.
                Origin::Opened => unsafe { d.ipc_close(self.ptr) },
            }),
            #[cfg(not(feature = "cuda"))]
            (RawDevice::Cuda(d), _) => match *d {},
            (RawDevice::Hip(_), _) => Ok(()),
        };
        if let Err(e) = r {
            crate::diag::report(format!("freeing shared memory failed: {e}"));
        }
    }
}
