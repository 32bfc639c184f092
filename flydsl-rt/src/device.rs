//! Devices: discovery per backend, selection (`Device::best`), properties.

use crate::backend::{self, RawDevice, RawFunction};
use crate::error::{Error, Result};
use crate::launch::decode::Decoded;
use crate::types::{Backend, DeviceId, DeviceInfo, DeviceLabel};
use flydsl_ir::Target;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

// Parsed here, where `FLYDSL_BACKEND` is read (`types` depends on nothing, not even `Error`).
impl FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Backend> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hip" => Ok(Backend::Hip),
            "cuda" => Ok(Backend::Cuda),
            "sim" => Ok(Backend::Sim),
            _ => Err(Error::UnknownBackend(s.to_string())),
        }
    }
}

pub(crate) struct DeviceInner {
    pub(crate) id: DeviceId,
    pub(crate) backend: Backend,
    pub(crate) ordinal: usize,
    pub(crate) info: DeviceInfo,
    pub(crate) raw: RawDevice,
    /// Loaded kernels, keyed by the address of their static `KernelVariant` (`loading`
    /// serialises the loads so each variant loads once).
    modules: RwLock<BTreeMap<usize, Arc<RawFunction>>>,
    loading: Mutex<()>,
}

/// A GPU (or simulated GPU). Cheap to clone: clones share one device.
///
/// `Device` is `Send + Sync`: its properties are immutable and its module cache is behind a
/// lock; backend calls make the device current on the calling thread first.
///
/// ```
/// use flydsl_rt::{Backend, Device, Target};
/// let d = Device::sim(Target::Gfx1201);
/// assert_eq!(d.backend(), Backend::Sim);
/// assert_eq!(d.wave_size(), 32);
/// assert_eq!(d.name(), "flydsl Sim (gfx1201, wave32)");
/// ```
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.inner.id)
            .field("backend", &self.inner.backend)
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.info.name)
            .field("target", &self.inner.info.target)
            .finish()
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.inner.id == other.inner.id
    }
}

impl Eq for Device {}

type Enumerated = Vec<std::result::Result<Device, String>>;

fn wrap(backend: Backend, ordinal: usize, raw: RawDevice, info: DeviceInfo) -> Device {
    Device {
        inner: Arc::new(DeviceInner {
            id: DeviceId::next(),
            backend,
            ordinal,
            info,
            raw,
            modules: RwLock::new(BTreeMap::new()),
            loading: Mutex::new(()),
        }),
    }
}

/// GPU backends are enumerated once per process (and per HIP library path), so the same
/// physical device is always the same `Device`.
fn gpu_devices(backend: Backend) -> Result<Vec<Result<Device>>> {
    static HIP: Mutex<Option<HashMap<Vec<String>, Enumerated>>> = Mutex::new(None);
    static CUDA: OnceLock<std::result::Result<Enumerated, String>> = OnceLock::new();
    let to_result = |list: &Enumerated, errs: &dyn Fn(usize, &str) -> Error| {
        list.iter()
            .enumerate()
            .map(|(i, d)| d.clone().map_err(|e| errs(i, &e)))
            .collect::<Vec<_>>()
    };
    match backend {
        Backend::Hip => {
            let key = backend::hip::sys::candidates();
            let mut cache = HIP.lock().unwrap_or_else(|e| e.into_inner());
            let cache = cache.get_or_insert_with(HashMap::new);
            if !cache.contains_key(&key) {
                let list = backend::hip::enumerate()?
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| {
                        r.map(|(d, info)| wrap(Backend::Hip, i, RawDevice::Hip(d), info))
                            .map_err(|e| e.to_string())
                    })
                    .collect();
                cache.insert(key.clone(), list);
            }
            Ok(to_result(&cache[&key], &reenumerated(Backend::Hip)))
        }
        Backend::Cuda => {
            let list = CUDA.get_or_init(|| match backend::cuda::enumerate() {
                Ok(list) => Ok(list
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| {
                        r.map(|(d, info)| wrap(Backend::Cuda, i, RawDevice::Cuda(d), info))
                            .map_err(|e| e.to_string())
                    })
                    .collect()),
                Err(Error::BackendUnavailable { reason, .. }) => Err(reason),
                Err(e) => Err(e.to_string()),
            });
            match list {
                Ok(list) => Ok(to_result(list, &reenumerated(Backend::Cuda))),
                Err(reason) => Err(Error::BackendUnavailable {
                    backend: Backend::Cuda,
                    reason: reason.clone(),
                }),
            }
        }
        #[cfg(feature = "sim")]
        Backend::Sim => Ok(vec![Ok(Device::sim(sim_target_from_env()?))]),
        #[cfg(not(feature = "sim"))]
        Backend::Sim => Err(Error::BackendUnavailable {
            backend: Backend::Sim,
            reason: "flydsl-rt was built without its `sim` cargo feature; enable it".into(),
        }),
    }
}

/// Cached per-device failures are kept as text and re-raised as `UnsupportedDevice`.
fn reenumerated(backend: Backend) -> impl Fn(usize, &str) -> Error {
    move |ordinal, msg| Error::UnsupportedDevice {
        backend,
        ordinal,
        name: String::from("?"),
        reason: msg.to_string(),
    }
}

#[cfg(feature = "sim")]
fn sim_target_from_env() -> Result<Target> {
    match std::env::var("FLYDSL_SIM_TARGET") {
        Ok(s) if !s.trim().is_empty() => s
            .parse::<Target>()
            .map_err(|_| Error::UnknownSimTarget(s.clone())),
        _ => Ok(Target::Gfx942),
    }
}

impl Device {
    /// The usable devices of `backend`, in ordinal order. A backend whose library is missing is
    /// [`Error::BackendUnavailable`]; present GPUs that flydsl does not target are skipped, and
    /// if every GPU is such, the first [`Error::UnsupportedDevice`] is returned. The Sim backend
    /// has one device, of `FLYDSL_SIM_TARGET` (default gfx942).
    ///
    /// ```
    /// use flydsl_rt::{Backend, Device};
    /// let sims = Device::enumerate(Backend::Sim).unwrap();
    /// assert_eq!(sims.len(), 1);
    /// ```
    pub fn enumerate(backend: Backend) -> Result<Vec<Device>> {
        let all = gpu_devices(backend)?;
        let mut first_err = None;
        let mut ok = Vec::new();
        for d in all {
            match d {
                Ok(d) => ok.push(d),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match (ok.is_empty(), first_err) {
            (true, Some(e)) => Err(e),
            _ => Ok(ok),
        }
    }

    /// Device `ordinal` of `backend`.
    ///
    /// ```
    /// use flydsl_rt::{Backend, Device, Error};
    /// assert!(matches!(Device::new(Backend::Sim, 3), Err(Error::NoSuchDevice { .. })));
    /// ```
    pub fn new(backend: Backend, ordinal: usize) -> Result<Device> {
        let all = gpu_devices(backend)?;
        let count = all.len();
        all.into_iter()
            .nth(ordinal)
            .unwrap_or(Err(Error::NoSuchDevice {
                backend,
                ordinal,
                count,
            }))
    }

    /// The best device: `FLYDSL_BACKEND=hip|cuda|sim` if set, else the first HIP device, else
    /// the first CUDA device, else the Sim (target `FLYDSL_SIM_TARGET`, default gfx942).
    ///
    /// A backend that is present but whose GPUs are all unsupported is an error (it says to set
    /// `FLYDSL_BACKEND=sim`), not a silent fallback to the simulator.
    ///
    /// ```
    /// let d = flydsl_rt::Device::best().unwrap();
    /// println!("{} ({})", d.name(), d.target());
    /// ```
    pub fn best() -> Result<Device> {
        if let Ok(v) = std::env::var("FLYDSL_BACKEND") {
            if !v.trim().is_empty() {
                let backend: Backend = v.parse()?;
                return Device::new(backend, 0);
            }
        }
        for backend in [Backend::Hip, Backend::Cuda] {
            match Device::enumerate(backend) {
                Ok(list) if !list.is_empty() => return Ok(list[0].clone()),
                Ok(_) | Err(Error::BackendUnavailable { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        #[cfg(feature = "sim")]
        return Ok(Device::sim(sim_target_from_env()?));
        #[cfg(not(feature = "sim"))]
        Err(Error::BackendUnavailable {
            backend: Backend::Sim,
            reason: "no HIP or CUDA device, and flydsl-rt was built without its `sim` cargo \
                     feature to fall back to"
                .into(),
        })
    }

    /// The process-wide Sim device emulating `target` (the same device on every call;
    /// cargo feature `sim`).
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// assert_eq!(Device::sim(Target::Sm90), Device::sim(Target::Sm90));
    /// ```
    #[cfg(feature = "sim")]
    pub fn sim(target: Target) -> Device {
        static SIMS: Mutex<Option<HashMap<Target, Device>>> = Mutex::new(None);
        let mut sims = SIMS.lock().unwrap_or_else(|e| e.into_inner());
        let sims = sims.get_or_insert_with(HashMap::new);
        sims.entry(target)
            .or_insert_with(|| Device::new_sim(target))
            .clone()
    }

    /// A new, independent Sim device emulating `target`, with its own memory (for tests of
    /// multi-device code).
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// assert_ne!(Device::new_sim(Target::Gfx950), Device::sim(Target::Gfx950));
    /// ```
    #[cfg(feature = "sim")]
    pub fn new_sim(target: Target) -> Device {
        Device::new_sim_with_compute_units(target, backend::sim::nominal_compute_units(target))
    }

    /// A new, independent Sim device emulating `target` that reports `compute_units` compute
    /// units: for tests of code that sizes its grid by the count (a persistent kernel
    /// whose few workgroups each walk many tiles). The Sim runs every workgroup whatever
    /// the count; 0 is taken as 1.
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// let dev = Device::new_sim_with_compute_units(Target::Sm90, 2);
    /// assert_eq!(dev.compute_units(), 2);
    /// assert_eq!(Device::sim(Target::Sm90).compute_units(), 132);
    /// ```
    #[cfg(feature = "sim")]
    pub fn new_sim_with_compute_units(target: Target, compute_units: u32) -> Device {
        let wave = target.wave_size();
        let info = DeviceInfo {
            name: format!("flydsl Sim ({}, wave{wave})", target.name()).into(),
            arch: target.name().to_string(),
            target,
            wave_size: wave,
            max_lds_bytes: u64::from(target.max_total_lds_bytes()),
            compute_units: compute_units.max(1),
        };
        wrap(
            Backend::Sim,
            0,
            RawDevice::Sim(backend::sim::SimDevice::new()),
            info,
        )
    }

    /// The process-unique id of this device.
    pub fn id(&self) -> DeviceId {
        self.inner.id
    }

    /// The backend that drives it.
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// Ordinal within its backend.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// Name as the driver reports it (`AMD Instinct MI300X`, `NVIDIA H200`,
    /// `flydsl Sim (gfx942, wave64)`).
    pub fn name(&self) -> &str {
        &self.inner.info.name
    }

    /// The driver's architecture string (`gfx942:sramecc+:xnack-`, `sm_90`).
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// assert_eq!(Device::sim(Target::Gfx950).arch(), "gfx950");
    /// ```
    pub fn arch(&self) -> &str {
        &self.inner.info.arch
    }

    /// The flydsl target whose code objects this device runs.
    pub fn target(&self) -> Target {
        self.inner.info.target
    }

    /// Threads per wave / warp.
    pub fn wave_size(&self) -> u32 {
        self.inner.info.wave_size
    }

    /// Largest LDS / shared memory per workgroup in bytes (48 KiB static on sm_90).
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// assert_eq!(Device::sim(Target::Gfx942).max_lds_bytes(), 65536);
    /// ```
    pub fn max_lds_bytes(&self) -> u64 {
        self.inner.info.max_lds_bytes
    }

    /// Compute units (AMD) or streaming multiprocessors (NVIDIA). Sim devices report the
    /// emulated product's count (304 for gfx942) unless made with
    /// [`Device::new_sim_with_compute_units`].
    pub fn compute_units(&self) -> u32 {
        self.inner.info.compute_units
    }

    /// Wait for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.raw.synchronize()
    }

    /// How errors name this device: backend, ordinal, name and id.
    ///
    /// ```
    /// let d = flydsl_rt::Device::sim(flydsl_rt::Target::Gfx1201);
    /// assert_eq!(&*d.label().name, d.name());
    /// ```
    pub fn label(&self) -> DeviceLabel {
        DeviceLabel {
            id: self.inner.id,
            backend: self.inner.backend,
            ordinal: self.inner.ordinal,
            name: self.inner.info.name.clone(),
        }
    }

    /// The loaded form of a kernel variant on this device, loading it on first use.
    pub(crate) fn module(
        &self,
        key: usize,
        code: Option<&'static [u8]>,
        decoded: &Decoded,
    ) -> Result<Arc<RawFunction>> {
        let lookup = || {
            let modules = self.inner.modules.read().unwrap_or_else(|e| e.into_inner());
            modules.get(&key).cloned()
        };
        if let Some(f) = lookup() {
            return Ok(f);
        }
        let _loading = self.inner.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = lookup() {
            return Ok(f);
        }
        let f = Arc::new(self.inner.raw.load(code, decoded)?);
        let mut modules = self
            .inner
            .modules
            .write()
            .unwrap_or_else(|e| e.into_inner());
        modules.insert(key, Arc::clone(&f));
        Ok(f)
    }
}
