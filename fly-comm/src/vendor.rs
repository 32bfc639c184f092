//! The vendor collective library, loaded at run time with `libloading` (like the HIP
//! backend's `libamdhip64`): NCCL (`libnccl.so.2`) on CUDA, RCCL (`librccl.so.1`) on HIP.
//! `FLY_COMM_NCCL_LIB` / `FLY_COMM_RCCL_LIB` name the library; else `$NCCL_HOME/lib`,
//! `$ROCM_PATH/lib`, then the loader path. RCCL keeps NCCL's API and ABI.

use crate::error::{CommError, Result};
use flydsl_rt::{Backend, Device, DeviceBuffer, Element, Stream};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// NCCL's `ncclUniqueId` (128 bytes, passed by value).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UniqueId {
    internal: [c_char; 128],
}

type Comm = *mut c_void;
type Res = c_int;

/// The entry points used.
struct Lib {
    _lib: libloading::Library,
    name: &'static str,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> Res,
    comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> Res,
    comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> Res,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        *mut c_void,
    ) -> Res,
    comm_destroy: unsafe extern "C" fn(Comm) -> Res,
    error_string: unsafe extern "C" fn(Res) -> *const c_char,
    group_start: unsafe extern "C" fn() -> Res,
    group_end: unsafe extern "C" fn() -> Res,
}

fn candidates(backend: Backend) -> (&'static str, Vec<String>) {
    let (name, var, home, files): (_, _, _, &[&str]) = match backend {
        Backend::Hip => (
            "RCCL",
            "FLY_COMM_RCCL_LIB",
            "ROCM_PATH",
            &["librccl.so.1", "librccl.so"],
        ),
        _ => (
            "NCCL",
            "FLY_COMM_NCCL_LIB",
            "NCCL_HOME",
            &["libnccl.so.2", "libnccl.so"],
        ),
    };
    let mut out = Vec::new();
    if let Ok(p) = std::env::var(var) {
        out.push(p);
    }
    if let Ok(h) = std::env::var(home) {
        for f in files {
            out.push(format!("{h}/lib/{f}"));
        }
    }
    out.extend(files.iter().map(|f| f.to_string()));
    (name, out)
}

fn load(backend: Backend) -> std::result::Result<&'static Lib, String> {
    static NCCL: OnceLock<std::result::Result<Lib, String>> = OnceLock::new();
    static RCCL: OnceLock<std::result::Result<Lib, String>> = OnceLock::new();
    let cell = if backend == Backend::Hip {
        &RCCL
    } else {
        &NCCL
    };
    cell.get_or_init(|| {
        let (name, paths) = candidates(backend);
        let mut errs = Vec::new();
        for p in &paths {
            // SAFETY: loading runs the library's initialisers; NCCL/RCCL have no unusual ones.
            match unsafe { libloading::Library::new(p) } {
                Ok(lib) => return resolve(lib, name).map_err(|e| format!("{p}: {e}")),
                Err(e) => errs.push(format!("{p}: {e}")),
            }
        }
        Err(format!(
            "could not load {name} ({}); install it (e.g. `pip install nvidia-nccl-cu12` gives \
             libnccl.so.2) and set FLY_COMM_{name}_LIB to its path",
            errs.join("; ")
        ))
    })
    .as_ref()
    .map_err(|e| e.clone())
}

fn resolve(lib: libloading::Library, name: &'static str) -> std::result::Result<Lib, String> {
    macro_rules! sym {
        ($s:literal) => {
            // SAFETY: the symbol has the C signature of NCCL's public header, which the field's
            // type spells; the library stays loaded in `_lib` while the pointer is used.
            *unsafe { lib.get(concat!($s, "\0").as_bytes()) }.map_err(|e| format!("{}: {e}", $s))?
        };
    }
    Ok(Lib {
        name,
        get_unique_id: sym!("ncclGetUniqueId"),
        comm_init_rank: sym!("ncclCommInitRank"),
        comm_init_all: sym!("ncclCommInitAll"),
        all_reduce: sym!("ncclAllReduce"),
        comm_destroy: sym!("ncclCommDestroy"),
        error_string: sym!("ncclGetErrorString"),
        group_start: sym!("ncclGroupStart"),
        group_end: sym!("ncclGroupEnd"),
        _lib: lib,
    })
}

impl Lib {
    fn check(&self, call: &str, r: Res) -> Result<()> {
        if r == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let msg = unsafe { CStr::from_ptr((self.error_string)(r)) }.to_string_lossy();
        Err(CommError::Vendor {
            library: self.name,
            reason: format!("{call} failed with {r} ({msg})"),
        })
    }
}

fn unavailable(backend: Backend, reason: String) -> CommError {
    CommError::Vendor {
        library: if backend == Backend::Hip {
            "RCCL"
        } else {
            "NCCL"
        },
        reason,
    }
}

/// A unique id of a vendor communicator, to send from rank 0 to every rank (one process
/// per GPU): [`VendorAllReduce::unique_id`] on rank 0, [`VendorAllReduce::init_rank`] on all.
#[derive(Clone, Copy)]
pub struct VendorId(UniqueId);

impl VendorId {
    /// The id as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.internal.iter().map(|&c| c as u8).collect()
    }
    /// An id from [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(b: &[u8]) -> Option<VendorId> {
        let a: [u8; 128] = b.try_into().ok()?;
        Some(VendorId(UniqueId {
            internal: a.map(|x| x as c_char),
        }))
    }
}

impl std::fmt::Debug for VendorId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VendorId(..)")
    }
}

/// One rank of a vendor (NCCL / RCCL) all-reduce communicator.
#[derive(Debug)]
pub struct VendorAllReduce {
    comm: Comm,
    device: Device,
    rank: usize,
    world: usize,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time (`&mut`-free
// API here: NCCL serializes per communicator internally for enqueue calls on one stream).
unsafe impl Send for VendorAllReduce {}
// SAFETY: as above.
unsafe impl Sync for VendorAllReduce {}

fn lib_for(device: &Device) -> Result<&'static Lib> {
    match device.backend() {
        Backend::Sim => Err(unavailable(
            Backend::Cuda,
            "the Sim has no vendor collective library; use the custom all-reduce".into(),
        )),
        b => load(b).map_err(|e| unavailable(b, e)),
    }
}

fn raw_ordinal(device: &Device) -> c_int {
    device.ordinal() as c_int
}

impl VendorAllReduce {
    /// Whether the vendor library for `device`'s backend loads.
    pub fn available(device: &Device) -> bool {
        lib_for(device).is_ok()
    }

    /// A fresh unique id (on rank 0; send its bytes to every rank).
    pub fn unique_id(device: &Device) -> Result<VendorId> {
        let lib = lib_for(device)?;
        let mut id = UniqueId { internal: [0; 128] };
        // SAFETY: `id` outlives the call.
        lib.check("ncclGetUniqueId", unsafe { (lib.get_unique_id)(&mut id) })?;
        Ok(VendorId(id))
    }

    /// Join communicator `id` as `rank` of `world` on `device` (one process per GPU; the
    /// device must be current: the runtime makes it current on every call).
    pub fn init_rank(
        device: &Device,
        id: VendorId,
        rank: usize,
        world: usize,
    ) -> Result<VendorAllReduce> {
        let lib = lib_for(device)?;
        // Make the device current (any stream call does; this one is cheap).
        device.stream()?.synchronize()?;
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: `comm` outlives the call; the id came from ncclGetUniqueId.
        lib.check("ncclCommInitRank", unsafe {
            (lib.comm_init_rank)(&mut comm, world as c_int, id.0, rank as c_int)
        })?;
        Ok(VendorAllReduce {
            comm,
            device: device.clone(),
            rank,
            world,
        })
    }

    /// One communicator per device of this process (`ncclCommInitAll`).
    pub fn init_all(devices: &[Device]) -> Result<Vec<VendorAllReduce>> {
        let Some(d0) = devices.first() else {
            return Ok(Vec::new());
        };
        let lib = lib_for(d0)?;
        let ords: Vec<c_int> = devices.iter().map(raw_ordinal).collect();
        let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: both arrays have `devices.len()` entries and outlive the call.
        lib.check("ncclCommInitAll", unsafe {
            (lib.comm_init_all)(comms.as_mut_ptr(), ords.len() as c_int, ords.as_ptr())
        })?;
        Ok(comms
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(rank, (comm, d))| VendorAllReduce {
                comm,
                device: d.clone(),
                rank,
                world: devices.len(),
            })
            .collect())
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// Sum `input` over the ranks into `output` on `stream` (`ncclAllReduce`, `ncclSum`).
    pub fn all_reduce<T: Element>(
        &self,
        stream: &Stream,
        input: &DeviceBuffer<T>,
        output: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        const F: &str = "fly_comm::VendorAllReduce::all_reduce";
        if input.len() != output.len() || stream.device() != &self.device {
            return Err(crate::error::arg(
                F,
                "output",
                format!("{} elements on {}", output.len(), output.device().label()),
                format!(
                    "must match the input's {} elements on the rank's device",
                    input.len()
                ),
                "pass equal buffers and a stream of the rank's device",
            ));
        }
        let lib = lib_for(&self.device)?;
        let dt = match T::DTYPE {
            flydsl_rt::DType::F16 => 6,
            flydsl_rt::DType::F32 => 7,
            flydsl_rt::DType::BF16 => 9,
        };
        let (src, dst, n) = (input.as_device_ptr(), output.as_device_ptr(), input.len());
        let r = stream.external(&[input.as_raw_buffer(), output.as_raw_buffer()], |raw| {
            // SAFETY: both buffers hold `n` elements on this device and are ordered on the
            // stream by `external`; the stream handle is live while `stream` is.
            unsafe {
                (lib.all_reduce)(
                    src as *const c_void,
                    dst as *mut c_void,
                    n,
                    dt,
                    0,
                    self.comm,
                    raw.unwrap_or(std::ptr::null_mut()),
                )
            }
        })?;
        lib.check("ncclAllReduce", r)
    }

    /// Enqueue `f` for every rank inside one `ncclGroupStart` / `ncclGroupEnd` (one thread
    /// driving several ranks must group their calls, or NCCL deadlocks).
    pub fn group<R>(device: &Device, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let lib = lib_for(device)?;
        // SAFETY: no arguments.
        lib.check("ncclGroupStart", unsafe { (lib.group_start)() })?;
        let r = f();
        // SAFETY: no arguments; closes the group opened above.
        lib.check("ncclGroupEnd", unsafe { (lib.group_end)() })?;
        r
    }
}

impl Drop for VendorAllReduce {
    fn drop(&mut self) {
        if let Ok(lib) = lib_for(&self.device) {
            // SAFETY: our communicator, destroyed once.
            let r = unsafe { (lib.comm_destroy)(self.comm) };
            if r != 0 {
                eprintln!("warning: fly-comm: ncclCommDestroy failed with {r}");
            }
        }
    }
}
