//! One rank of a custom all-reduce: its shared memory (signal area, staging area, two-stage
//! scratch), the addresses of every rank's memory as this device sees them, and set-up in
//! both modes (one process driving every device; one process per GPU exchanging handles).

use crate::config::{SIGNAL_BYTES, SIGNAL_WORDS, STATUS_MISMATCHES, STATUS_OFF, STATUS_TIMEOUTS};
use crate::error::{arg, CommError, Result};
use flydsl_rt::{Device, DeviceBuffer, IpcHandle, SharedMemory, Stream, Target};
use std::time::Duration;

/// Largest message (bytes) a group may register: element indices stay below 2^30.
pub const MAX_REGISTERED_BYTES: u64 = 1 << 30;

/// Set-up options of a group.
///
/// ```
/// let c = fly_comm::Config::default();
/// assert_eq!(c.max_bytes, 8 << 20);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Largest message in bytes (each rank's staging and scratch areas have this size).
    pub max_bytes: u64,
    /// Bound of every wait for a peer in a kernel; past it the kernel gives up, the rank is
    /// poisoned and `check` reports `CommError::Timeout`.
    pub timeout: Duration,
    /// Most workgroups per launch (at most `MAX_BLOCKS`, 64).
    pub max_blocks: u32,
    /// The one-/two-stage switch point in bytes (`None`: [`crate::two_stage_min_bytes`]).
    pub two_stage_min_bytes: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_bytes: 8 << 20,
            timeout: Duration::from_secs(10),
            max_blocks: 36,
            two_stage_min_bytes: None,
        }
    }
}

/// The world sizes the kernels exist for.
pub const WORLD_SIZES: [usize; 3] = [2, 4, 8];

/// Byte offsets of the areas of one rank's shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub staging: u64,
    pub scratch: u64,
    pub total: u64,
    pub max_bytes: u64,
}

impl Layout {
    pub(crate) fn of(max_bytes: u64) -> Layout {
        let area = max_bytes.next_multiple_of(256);
        Layout {
            staging: SIGNAL_BYTES,
            scratch: SIGNAL_BYTES + area,
            total: SIGNAL_BYTES + 2 * area,
            max_bytes,
        }
    }
}

/// One rank of a custom all-reduce group: see the crate docs.
#[derive(Debug)]
pub struct CustomAllReduce {
    pub(crate) rank: usize,
    pub(crate) world: usize,
    pub(crate) device: Device,
    pub(crate) layout: Layout,
    /// This rank's memory.
    pub(crate) own: SharedMemory,
    /// Peers' memories mapped from IPC handles (kept mapped while the rank lives).
    _mapped: Vec<SharedMemory>,
    /// Every rank's memory base address as this device reaches it, in rank order.
    pub(crate) bases: Vec<u64>,
    pub(crate) cfg: Config,
    /// The steady-counter ticks of `cfg.timeout` on this device's target.
    pub(crate) timeout_ticks: i64,
}

/// A rank that allocated its memory and waits for its peers' handles (one process per GPU):
/// exchange [`handle`](Self::handle) bytes with every other rank, then [`connect`](Self::connect).
#[derive(Debug)]
pub struct PendingRank {
    rank: usize,
    world: usize,
    device: Device,
    layout: Layout,
    own: SharedMemory,
    cfg: Config,
}

/// The target has kernels.
pub(crate) fn check_target(device: &Device) -> Result<()> {
    match device.target() {
        Target::Gfx942 | Target::Gfx950 | Target::Sm90 => Ok(()),
        target => Err(CommError::UnsupportedTarget { target }),
    }
}

fn check_config(function: &'static str, world: usize, cfg: &Config) -> Result<Layout> {
    if !WORLD_SIZES.contains(&world) {
        return Err(arg(
            function,
            "world size",
            world,
            "the kernels exist for 2, 4 and 8 ranks",
            "use 2, 4 or 8 ranks, or the vendor library (`AllReduce::vendor`)",
        ));
    }
    if cfg.max_bytes == 0 || cfg.max_bytes > MAX_REGISTERED_BYTES {
        return Err(arg(
            function,
            "cfg.max_bytes",
            cfg.max_bytes,
            format!("must be in 1..={MAX_REGISTERED_BYTES}"),
            "register at most 1 GiB; larger messages go to the vendor library",
        ));
    }
    if cfg.max_blocks == 0 || cfg.max_blocks > crate::config::MAX_BLOCKS {
        return Err(arg(
            function,
            "cfg.max_blocks",
            cfg.max_blocks,
            format!("must be in 1..={}", crate::config::MAX_BLOCKS),
            "pass a value in range (36 is the default)",
        ));
    }
    Ok(Layout::of(cfg.max_bytes))
}

fn ticks(device: &Device, timeout: Duration) -> i64 {
    let hz = u128::from(device.target().steady_counter_hz());
    i64::try_from(timeout.as_nanos() * hz / 1_000_000_000).unwrap_or(i64::MAX)
}

impl CustomAllReduce {
    /// Set up one rank per device in this process (peer access between every pair). The
    /// same device may appear several times (ranks emulated on one GPU, each with its own
    /// memory: their kernels must run concurrently, on distinct streams).
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// let devs = [Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90)];
    /// let ranks = fly_comm::CustomAllReduce::new_group(&devs, &fly_comm::Config::default()).unwrap();
    /// assert_eq!((ranks.len(), ranks[1].rank(), ranks[1].world_size()), (2, 1, 2));
    /// ```
    pub fn new_group(devices: &[Device], cfg: &Config) -> Result<Vec<CustomAllReduce>> {
        const F: &str = "fly_comm::CustomAllReduce::new_group";
        let layout = check_config(F, devices.len(), cfg)?;
        for d in devices {
            check_target(d)?;
        }
        for a in devices {
            for b in devices {
                a.enable_peer_access(b)?;
            }
        }
        let mems = devices
            .iter()
            .map(|d| SharedMemory::zeroed(d, layout.total))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let bases: Vec<u64> = mems.iter().map(|m| m.device_ptr()).collect();
        Ok(mems
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(rank, (own, d))| CustomAllReduce {
                rank,
                world: devices.len(),
                device: d.clone(),
                layout,
                own,
                _mapped: Vec::new(),
                bases: bases.clone(),
                cfg: cfg.clone(),
                timeout_ticks: ticks(d, cfg.timeout),
            })
            .collect())
    }

    /// Start setting up rank `rank` of `world` on `device` (one process per GPU): allocates
    /// its memory. Then exchange handles and call [`PendingRank::connect`].
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// use fly_comm::{Config, CustomAllReduce};
    /// let devs = [Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90)];
    /// let cfg = Config::default();
    /// let pending: Vec<_> = (0..2).map(|r| CustomAllReduce::prepare(&devs[r], r, 2, &cfg).unwrap()).collect();
    /// let handles: Vec<Vec<u8>> = pending.iter().map(|p| p.handle().unwrap()).collect();
    /// let ranks: Vec<_> = pending.into_iter().map(|p| p.connect(&handles).unwrap()).collect();
    /// assert_eq!(ranks[0].world_size(), 2);
    /// ```
    pub fn prepare(
        device: &Device,
        rank: usize,
        world: usize,
        cfg: &Config,
    ) -> Result<PendingRank> {
        const F: &str = "fly_comm::CustomAllReduce::prepare";
        let layout = check_config(F, world, cfg)?;
        check_target(device)?;
        if rank >= world {
            return Err(arg(
                F,
                "rank",
                rank,
                format!("must be below the world size {world}"),
                "pass this process's rank, 0..world",
            ));
        }
        Ok(PendingRank {
            rank,
            world,
            device: device.clone(),
            layout,
            own: SharedMemory::zeroed(device, layout.total)?,
            cfg: cfg.clone(),
        })
    }

    /// This rank's index.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// This rank's device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The largest message in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.layout.max_bytes
    }

    /// The one-/two-stage switch point this rank uses.
    pub fn two_stage_min_bytes(&self) -> u64 {
        self.cfg
            .two_stage_min_bytes
            .unwrap_or_else(|| crate::select::two_stage_min_bytes(self.world))
    }

    /// The algorithm a message of `bytes` takes.
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// use fly_comm::{Algorithm, Config, CustomAllReduce};
    /// let devs = [Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90)];
    /// let cfg = Config { two_stage_min_bytes: Some(4096), ..Config::default() };
    /// let r = CustomAllReduce::new_group(&devs, &cfg).unwrap();
    /// assert_eq!(r[0].algorithm_for(4096), Algorithm::TwoStage);
    /// assert_eq!(r[0].algorithm_for(4095), Algorithm::OneStage);
    /// ```
    pub fn algorithm_for(&self, bytes: u64) -> crate::Algorithm {
        crate::select::pick(bytes, self.world, self.two_stage_min_bytes())
    }

    /// A view of this rank's staging area as `len` elements of `T` on `stream`: data written
    /// there is all-reduced by [`all_reduce_registered`](Self::all_reduce_registered) without
    /// a copy.
    pub fn registered_input<T: flydsl_rt::Element>(
        &self,
        stream: &Stream,
        len: usize,
    ) -> Result<DeviceBuffer<T>> {
        const F: &str = "fly_comm::CustomAllReduce::registered_input";
        let bytes = len as u64 * u64::from(T::DTYPE.bytes());
        if bytes > self.layout.max_bytes {
            return Err(CommError::TooLarge {
                function: F,
                bytes,
                max: self.layout.max_bytes,
            });
        }
        // SAFETY: the staging area is this rank's own allocation (it outlives the view only
        // as long as `self` lives: the caller keeps the rank); only the all-reduce kernels of
        // this group read it, after the copy or write the stream orders before them.
        Ok(unsafe {
            DeviceBuffer::from_raw_parts(stream, self.own.device_ptr() + self.layout.staging, len)
        }?)
    }

    /// Wait for `stream` and read this rank's status words: an error if a kernel of this rank
    /// timed out waiting for a peer (sticky: the rank stays poisoned) or found a peer's call
    /// different (cleared once reported).
    pub fn check(&self, stream: &Stream) -> Result<()> {
        stream.synchronize()?;
        let mut st = self.status_view(stream)?;
        let words = st.to_vec()?;
        let (timeouts, mismatches) = (
            words[STATUS_TIMEOUTS as usize] as u32,
            words[STATUS_MISMATCHES as usize] as u32,
        );
        if timeouts > 0 {
            return Err(CommError::Timeout {
                rank: self.rank,
                waits: timeouts,
                timeout_ms: self.cfg.timeout.as_millis() as u64,
            });
        }
        if mismatches > 0 {
            let mut w = words.clone();
            w[STATUS_MISMATCHES as usize] = 0;
            st.copy_from_slice(&w)?;
            return Err(CommError::PeerMismatch {
                rank: self.rank,
                count: mismatches,
            });
        }
        Ok(())
    }

    /// The status words as a buffer view.
    fn status_view(&self, stream: &Stream) -> Result<DeviceBuffer<i32>> {
        let at = self.own.device_ptr() + u64::from(STATUS_OFF) * 4;
        let n = (SIGNAL_WORDS - STATUS_OFF) as usize;
        // SAFETY: inside this rank's own allocation; read and written only after the
        // stream's work is done (`check` synchronizes first).
        Ok(unsafe { DeviceBuffer::from_raw_parts(stream, at, n) }?)
    }
}

impl PendingRank {
    /// This rank's handle, to send to every other rank.
    pub fn handle(&self) -> Result<Vec<u8>> {
        Ok(self.own.ipc_handle()?.to_bytes().to_vec())
    }

    /// Finish set-up with every rank's handle (in rank order, this rank's own included).
    pub fn connect(self, handles: &[Vec<u8>]) -> Result<CustomAllReduce> {
        const F: &str = "fly_comm::PendingRank::connect";
        if handles.len() != self.world {
            return Err(CommError::WorldSize {
                function: F,
                got: handles.len(),
                built: self.world,
            });
        }
        let mut bases = Vec::with_capacity(self.world);
        let mut mapped = Vec::new();
        for (r, h) in handles.iter().enumerate() {
            if r == self.rank {
                bases.push(self.own.device_ptr());
                continue;
            }
            let h = IpcHandle::from_bytes(h)?;
            if h.len_bytes() != self.layout.total {
                return Err(CommError::RankMismatch {
                    function: F,
                    argument: "shared memory size (Config::max_bytes)",
                    rank: r,
                    value: h.len_bytes().to_string(),
                    expected: self.layout.total.to_string(),
                });
            }
            let m = SharedMemory::open_ipc(&self.device, &h)?;
            bases.push(m.device_ptr());
            mapped.push(m);
        }
        Ok(CustomAllReduce {
            rank: self.rank,
            world: self.world,
            timeout_ticks: ticks(&self.device, self.cfg.timeout),
            device: self.device,
            layout: self.layout,
            own: self.own,
            _mapped: mapped,
            bases,
            cfg: self.cfg,
        })
    }
}
