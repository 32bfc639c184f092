//! The launch contract used by generated launchers: [`LaunchConfig`], [`KernelArgs`], and the
//! validation that [`Stream::launch`](crate::Stream::launch) runs before every launch.

use crate::buffer::DeviceBuffer;
use crate::device::{Backend, Device, DeviceId};
use crate::error::{Error, Result};
use crate::repr::{as_bytes, DeviceRepr};
use crate::variant::{KernelVariant, KernelVariants};
use flydsl_ir::{KernargLayout, Kernel};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// Grid and block dimensions of a launch (`grid` counts workgroups, not threads), and the
/// dynamic LDS / shared-memory bytes per workgroup for kernels with a dynamic LDS region.
///
/// ```
/// use flydsl_rt::LaunchConfig;
/// let cfg = LaunchConfig::for_elements(1000, 256);
/// assert_eq!(cfg.grid, [4, 1, 1]);
/// assert_eq!(cfg.block, [256, 1, 1]);
/// assert_eq!(cfg.threads_per_block(), 256);
/// assert_eq!(cfg.with_dynamic_lds(4096).dynamic_lds_bytes, 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Workgroups in x, y, z.
    pub grid: [u32; 3],
    /// Threads per workgroup in x, y, z.
    pub block: [u32; 3],
    /// Bytes of the kernel's dynamic LDS region per workgroup (0 for kernels without one).
    /// Size it with `flydsl_ir::dynamic_lds_layout`, the rule the DSL's dynamic arrays follow.
    pub dynamic_lds_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `grid_x` workgroups of `block_x` threads.
    ///
    /// ```
    /// let cfg = flydsl_rt::LaunchConfig::linear(8, 64);
    /// assert_eq!((cfg.grid, cfg.block), ([8, 1, 1], [64, 1, 1]));
    /// ```
    pub fn linear(grid_x: u32, block_x: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [grid_x, 1, 1],
            block: [block_x, 1, 1],
            dynamic_lds_bytes: 0,
        }
    }

    /// A 1-D launch covering `n` elements with one thread each, `block_x` threads per
    /// workgroup (the grid is rounded up; more than `u32::MAX` workgroups saturate, which the
    /// launch then rejects as too large only if the device does).
    ///
    /// ```
    /// let cfg = flydsl_rt::LaunchConfig::for_elements(0, 128);
    /// assert_eq!(cfg.grid, [0, 1, 1]); // an empty launch is a no-op
    /// ```
    pub fn for_elements(n: u64, block_x: u32) -> LaunchConfig {
        let blocks = n.div_ceil(u64::from(block_x.max(1)));
        LaunchConfig::linear(u32::try_from(blocks).unwrap_or(u32::MAX), block_x)
    }

    /// A 2-D grid of `block` workgroups.
    ///
    /// ```
    /// let cfg = flydsl_rt::LaunchConfig::grid_2d([4, 3], [16, 16]);
    /// assert_eq!(cfg.grid, [4, 3, 1]);
    /// ```
    pub fn grid_2d(grid: [u32; 2], block: [u32; 2]) -> LaunchConfig {
        LaunchConfig {
            grid: [grid[0], grid[1], 1],
            block: [block[0], block[1], 1],
            dynamic_lds_bytes: 0,
        }
    }

    /// The same launch with `bytes` of dynamic LDS per workgroup.
    ///
    /// ```
    /// use flydsl_ir::{dynamic_lds_layout, ScalarType};
    /// // A kernel carving n f32 and n i32 from its dynamic region.
    /// let n = 1000;
    /// let (_, bytes) = dynamic_lds_layout(&[(ScalarType::F32, n), (ScalarType::I32, n)]).unwrap();
    /// let cfg = flydsl_rt::LaunchConfig::linear(1, 256).with_dynamic_lds(bytes as u32);
    /// assert_eq!(cfg.dynamic_lds_bytes, 8000);
    /// ```
    pub fn with_dynamic_lds(mut self, bytes: u32) -> LaunchConfig {
        self.dynamic_lds_bytes = bytes;
        self
    }

    /// Threads per workgroup (as `u64`, so oversized blocks cannot overflow).
    pub fn threads_per_block(&self) -> u64 {
        self.block
            .iter()
            .fold(1u64, |a, &b| a.saturating_mul(u64::from(b)))
    }

    /// True when some grid dimension is zero (the launch does nothing).
    pub fn is_empty(&self) -> bool {
        self.grid.contains(&0)
    }
}

#[derive(Clone, Copy, Debug)]
struct Push {
    offset: usize,
    size: usize,
    pointer: bool,
}

/// A packed kernel-argument buffer plus the devices of the buffers pushed into it.
///
/// The layout is the kernel's [`KernargLayout`]: a tensor parameter is a 64-bit device pointer
/// followed by its element count as `i64`; a scalar is its bytes at natural alignment.
/// Generated launchers write every slot; [`Stream::launch`](crate::Stream::launch) then checks
/// the size, that every slot was written with the right kind and size, and the devices.
/// A write past the end is recorded and reported by the launch (never a panic).
///
/// ```
/// use flydsl_rt::{Device, DeviceBuffer, KernelArgs, Target};
/// let dev = Device::sim(Target::Gfx942);
/// let x = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
/// let mut args = KernelArgs::new(24);
/// args.tensor(0, &x);
/// args.scalar(16, 1.5f32);
/// assert_eq!(&args.bytes()[8..16], &4i64.to_le_bytes());
/// ```
#[derive(Clone, Debug)]
pub struct KernelArgs {
    bytes: Vec<u8>,
    devices: Vec<DeviceId>,
    pushes: Vec<Push>,
    overflow: Option<String>,
}

impl KernelArgs {
    /// An all-zero buffer of `size` bytes (the kernel's `kernarg_layout().size`).
    ///
    /// ```
    /// assert_eq!(flydsl_rt::KernelArgs::new(16).bytes().len(), 16);
    /// ```
    pub fn new(size: usize) -> KernelArgs {
        KernelArgs {
            bytes: vec![0; size],
            devices: Vec::new(),
            // A slot is at least 4 bytes: one allocation covers every push of a launcher.
            pushes: Vec::with_capacity(size.div_ceil(4).min(64)),
            overflow: None,
        }
    }

    fn write(&mut self, offset: usize, data: &[u8], pointer: bool) {
        let end = offset.checked_add(data.len());
        match end {
            Some(end) if end <= self.bytes.len() => {
                self.bytes[offset..end].copy_from_slice(data);
                self.pushes.push(Push {
                    offset,
                    size: data.len(),
                    pointer,
                });
            }
            _ => {
                self.overflow.get_or_insert_with(|| {
                    format!(
                        "an argument of {} bytes at offset {offset} does not fit in the {}-byte \
                         buffer; size KernelArgs::new with the kernel's kernarg_layout().size",
                        data.len(),
                        self.bytes.len()
                    )
                });
            }
        }
    }

    /// Write `buf`'s device pointer (`u64`) at `offset` and its length (`i64`) at `offset + 8`,
    /// and remember its device.
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, KernelArgs, Target};
    /// let x = DeviceBuffer::<u8>::zeroed(&Device::sim(Target::Gfx942), 3).unwrap();
    /// let mut args = KernelArgs::new(16);
    /// args.tensor(0, &x);
    /// assert_eq!(&args.bytes()[0..8], &x.as_device_ptr().to_le_bytes());
    /// ```
    pub fn tensor<T: DeviceRepr>(&mut self, offset: usize, buf: &DeviceBuffer<T>) {
        self.write(offset, &buf.as_device_ptr().to_le_bytes(), true);
        let len = i64::try_from(buf.len()).unwrap_or(i64::MAX);
        self.write(offset.saturating_add(8), &len.to_le_bytes(), false);
        if !self.devices.contains(&buf.device_id()) {
            self.devices.push(buf.device_id());
        }
    }

    /// Write `v`'s bytes at `offset`.
    ///
    /// ```
    /// let mut args = flydsl_rt::KernelArgs::new(8);
    /// args.scalar(4, 7i32);
    /// assert_eq!(args.bytes(), &[0, 0, 0, 0, 7, 0, 0, 0]);
    /// ```
    pub fn scalar<T: DeviceRepr>(&mut self, offset: usize, v: T) {
        self.write(offset, as_bytes(std::slice::from_ref(&v)), false);
    }

    /// The packed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The devices of the buffers pushed so far.
    pub fn devices(&self) -> &[DeviceId] {
        &self.devices
    }

    /// Check the pushes against `layout`: every slot written once or more with its own kind
    /// and size, nothing written between slots.
    fn check(&self, layout: &KernargLayout) -> std::result::Result<(), String> {
        if let Some(e) = &self.overflow {
            return Err(e.clone());
        }
        if self.bytes.len() != layout.size as usize {
            return Err(format!(
                "the buffer has {} bytes but the kernel's kernarg layout has {}; size \
                 KernelArgs::new with kernarg_layout().size",
                self.bytes.len(),
                layout.size
            ));
        }
        // Which slots were written: on the stack for up to 64 slots.
        let n = layout.slots.len();
        let (mut small, mut large) = ([false; 64], Vec::new());
        let written: &mut [bool] = if n <= small.len() {
            &mut small[..n]
        } else {
            large.resize(n, false);
            &mut large
        };
        for p in &self.pushes {
            let Ok(i) = layout
                .slots
                .binary_search_by_key(&(p.offset as u32), |s| s.offset)
            else {
                return Err(format!(
                    "a {}-byte {} was written at offset {}, which is not the start of any \
                     argument",
                    p.size,
                    if p.pointer { "pointer" } else { "value" },
                    p.offset
                ));
            };
            let slot = &layout.slots[i];
            if slot.is_pointer != p.pointer || slot.size as usize != p.size {
                return Err(format!(
                    "argument `{}` at offset {} is a {}-byte {} but a {}-byte {} was written \
                     there",
                    slot.name,
                    slot.offset,
                    slot.size,
                    if slot.is_pointer { "pointer" } else { "value" },
                    p.size,
                    if p.pointer {
                        "pointer (tensor)"
                    } else {
                        "value"
                    }
                ));
            }
            written[i] = true;
        }
        if let Some(i) = written.iter().position(|w| !w) {
            let slot = &layout.slots[i];
            return Err(format!(
                "argument `{}` at offset {} was never written; push every parameter",
                slot.name, slot.offset
            ));
        }
        Ok(())
    }
}

/// A kernel's decoded IR and what the launcher needs from it.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub kernel: Kernel,
    pub layout: KernargLayout,
    pub lds_bytes: u64,
}

/// Decode a variant's IR once per process (keyed by the address of the static IR bytes). The
/// lookup is lock-free; the decoded IR lives for the rest of the process.
fn decoded(kernel: &KernelVariants, ir: &'static [u8]) -> Result<&'static Decoded> {
    static CACHE: AddrMap<Decoded, 1024> = AddrMap::new();
    let key = ir.as_ptr() as usize;
    if let Some(d) = CACHE.get(key) {
        return Ok(d);
    }
    let ir_kernel = flydsl_ir::from_bytes(ir).map_err(|e| Error::BadVariant {
        kernel: kernel.name.to_string(),
        reason: e.to_string(),
    })?;
    Ok(CACHE.insert(
        key,
        Decoded {
            layout: ir_kernel.kernarg_layout(),
            lds_bytes: u64::from(ir_kernel.lds_bytes()),
            kernel: ir_kernel,
        },
    ))
}

/// A grow-only map from nonzero addresses to values: lookups are lock-free (a fixed
/// open-addressed table of `N` slots, `N` a power of two); entries that do not fit go to a
/// locked overflow list. Entries are never removed, so references live as long as the map.
pub(crate) struct AddrMap<V, const N: usize> {
    slots: [AtomicPtr<(usize, V)>; N],
    spill: Mutex<Vec<Box<(usize, V)>>>,
    _owns: PhantomData<*mut V>,
}

// SAFETY: the map owns its values (dropped with it, possibly on another thread: `V: Send`) and
// hands out shared references to them across threads (`V: Sync`).
unsafe impl<V: Send + Sync, const N: usize> Sync for AddrMap<V, N> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync, const N: usize> Send for AddrMap<V, N> {}

impl<V, const N: usize> AddrMap<V, N> {
    /// An empty map.
    pub(crate) const fn new() -> Self {
        assert!(N.is_power_of_two());
        AddrMap {
            slots: [const { AtomicPtr::new(std::ptr::null_mut()) }; N],
            spill: Mutex::new(Vec::new()),
            _owns: PhantomData,
        }
    }

    /// The probe sequence of `key`: its hashed home slot, then the following slots.
    fn probe(key: usize) -> impl Iterator<Item = usize> {
        let home = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        (0..N).map(move |i| (home as usize).wrapping_add(i) & (N - 1))
    }

    /// The value of `key`, if inserted.
    pub(crate) fn get(&self, key: usize) -> Option<&V> {
        for i in Self::probe(key) {
            let p = self.slots[i].load(Ordering::Acquire);
            if p.is_null() {
                // Inserts fill the first empty slot of the probe sequence and nothing is ever
                // removed: an empty slot ends the search.
                return None;
            }
            // SAFETY: non-null slots hold entries published with Release and never freed
            // before the map.
            let e = unsafe { &*p };
            if e.0 == key {
                return Some(&e.1);
            }
        }
        let spill = self.spill.lock().unwrap_or_else(|e| e.into_inner());
        let e: *const (usize, V) = &**spill.iter().find(|e| e.0 == key)?;
        // SAFETY: boxed entries never move or get freed before the map.
        Some(unsafe { &(*e).1 })
    }

    /// Insert `value` for `key` unless present; the value stored for `key` either way.
    pub(crate) fn insert(&self, key: usize, value: V) -> &V {
        let mine = Box::into_raw(Box::new((key, value)));
        for i in Self::probe(key) {
            let mut p = self.slots[i].load(Ordering::Acquire);
            if p.is_null() {
                match self.slots[i].compare_exchange(
                    std::ptr::null_mut(),
                    mine,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    // SAFETY: just published; lives as long as the map.
                    Ok(_) => return unsafe { &(*mine).1 },
                    Err(now) => p = now,
                }
            }
            // SAFETY: as in `get`.
            let e = unsafe { &*p };
            if e.0 == key {
                // SAFETY: `mine` was never published.
                drop(unsafe { Box::from_raw(mine) });
                return &e.1;
            }
        }
        // SAFETY: `mine` was never published.
        let mine = unsafe { Box::from_raw(mine) };
        let mut spill = self.spill.lock().unwrap_or_else(|e| e.into_inner());
        let e: *const (usize, V) = match spill.iter().find(|e| e.0 == key) {
            Some(e) => &**e,
            None => {
                spill.push(mine);
                &**spill.last().expect("just pushed")
            }
        };
        // SAFETY: boxed entries never move or get freed before the map.
        unsafe { &(*e).1 }
    }
}

impl<V, const N: usize> Drop for AddrMap<V, N> {
    fn drop(&mut self) {
        for s in &mut self.slots {
            let p = *s.get_mut();
            if !p.is_null() {
                // SAFETY: published entries are owned by the map and freed exactly once.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// The resources of `kernel`'s variant for `device`, loading it (the body of
/// [`Device::kernel_resources`](crate::Device::kernel_resources)).
pub(crate) fn resources(
    device: &Device,
    kernel: &'static KernelVariants,
) -> Result<Option<crate::KernelResources>> {
    let (variant, code) = variant_for(device, kernel)?;
    if code.is_none() {
        return Ok(None);
    }
    let d = decoded(kernel, variant.ir)?;
    device
        .module(variant as *const _ as usize, code, d)?
        .resources()
}

/// `kernel`'s variant for `device`'s target and its code object (`None` on the Sim, which
/// runs the IR), or the error naming the cargo feature that builds it.
fn variant_for(
    device: &Device,
    kernel: &'static KernelVariants,
) -> Result<(&'static KernelVariant, Option<&'static [u8]>)> {
    let target = device.target();
    let missing = || Error::MissingVariant {
        kernel: kernel.name.to_string(),
        crate_name: kernel.crate_name.to_string(),
        target,
        built: kernel.built_targets().collect(),
    };
    let variant = kernel.for_target(target).ok_or_else(missing)?;
    let code = match device.backend() {
        Backend::Sim => None,
        _ => Some(variant.code.ok_or_else(missing)?),
    };
    Ok((variant, code))
}

/// Validate and launch (the body of [`Stream::launch`](crate::Stream::launch)).
///
/// # Safety
/// See `Stream::launch`.
pub(crate) unsafe fn launch(
    device: &Device,
    raw_stream: &crate::backend::RawStream,
    kernel: &'static KernelVariants,
    cfg: LaunchConfig,
    args: &KernelArgs,
) -> Result<()> {
    let target = device.target();
    let (variant, code) = variant_for(device, kernel)?;
    let d = decoded(kernel, variant.ir)?;
    let bad_variant = |reason: String| Error::BadVariant {
        kernel: kernel.name.to_string(),
        reason,
    };
    if d.kernel.target != target || d.kernel.name != kernel.name {
        return Err(bad_variant(format!(
            "the {target} variant embeds IR of kernel `{}` for {}",
            d.kernel.name, d.kernel.target
        )));
    }
    let invalid = |reason: String| Error::InvalidLaunch {
        kernel: kernel.name.to_string(),
        grid: cfg.grid,
        block: cfg.block,
        reason,
    };
    let threads = cfg.threads_per_block();
    let max = u64::from(d.kernel.attrs.max_threads.min(1024));
    if threads == 0 || threads > max {
        return Err(invalid(format!(
            "{threads} threads per workgroup; this kernel allows 1..={max} (its max_threads \
             attribute, at most 1024)"
        )));
    }
    if let Some(reason) = grid_limit(target, &cfg) {
        return Err(invalid(reason));
    }
    args.check(&d.layout).map_err(|reason| Error::KernelArgs {
        kernel: kernel.name.to_string(),
        reason,
    })?;
    if let Some(&other) = args.devices.iter().find(|&&id| id != device.id()) {
        return Err(Error::WrongDevice {
            kernel: kernel.name.to_string(),
            buffer_device: other,
            stream_device: device.id(),
        });
    }
    let lds_bytes = match &d.kernel.dynamic_lds {
        Some(_) => u64::from(d.kernel.dynamic_lds_offset()) + u64::from(cfg.dynamic_lds_bytes),
        None if cfg.dynamic_lds_bytes > 0 => {
            return Err(invalid(format!(
                "dynamic_lds_bytes is {} but the kernel declares no dynamic LDS region; \
                 launch it with 0",
                cfg.dynamic_lds_bytes
            )))
        }
        None => d.lds_bytes,
    };
    if lds_bytes > device.max_lds_bytes() {
        return Err(Error::LdsTooLarge {
            kernel: kernel.name.to_string(),
            bytes: lds_bytes,
            dynamic: cfg.dynamic_lds_bytes,
            limit: device.max_lds_bytes(),
        });
    }
    if cfg.is_empty() {
        return Ok(());
    }
    let f = device.module(variant as *const _ as usize, code, d)?;
    // SAFETY: the stream and function belong to `device`, the argument buffer matches the
    // layout (checked above) and holds pointers of live buffers of this device; in-bounds
    // accesses are the caller's obligation.
    unsafe { device.inner.raw.launch(raw_stream, f, d, &cfg, &args.bytes) }
}

/// The hardware's grid limits: AMD counts grid size in threads (at most 2^32 - 1 per
/// dimension); NVIDIA allows 2^31 - 1 blocks in x and 65535 in y and z.
fn grid_limit(target: flydsl_ir::Target, cfg: &LaunchConfig) -> Option<String> {
    if target.is_amd() {
        (0..3).find_map(|i| {
            let threads = u64::from(cfg.grid[i]) * u64::from(cfg.block[i]);
            (threads > u64::from(u32::MAX)).then(|| {
                format!(
                    "dimension {i} has {threads} threads in total; AMD GPUs allow at most \
                     {} per dimension",
                    u32::MAX
                )
            })
        })
    } else {
        let max = [i32::MAX as u32, 65535, 65535];
        (0..3).find_map(|i| {
            (cfg.grid[i] > max[i]).then(|| {
                format!(
                    "grid dimension {i} is {}; NVIDIA GPUs allow at most {}",
                    cfg.grid[i], max[i]
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::AddrMap;

    #[test]
    fn addr_map_keeps_first_value_and_spills_past_its_table() {
        let m: AddrMap<String, 4> = AddrMap::new();
        assert!(m.get(8).is_none());
        for k in 1..=10usize {
            assert_eq!(m.insert(k * 8, format!("v{k}")), &format!("v{k}"));
        }
        assert_eq!(m.insert(16, "again".into()), "v2");
        for k in 1..=10usize {
            assert_eq!(
                m.get(k * 8).map(String::as_str),
                Some(format!("v{k}").as_str())
            );
        }
        assert!(m.get(88).is_none());
    }
}
