//! Simulated device memory: allocations addressed by `handle << 40 | byte offset`.
//!
//! Handles are unique in the process (one counter for every [`SimMemory`]), so an address
//! names its allocation whichever Sim device holds it: a memory that enabled a peer
//! ([`SimMemory::enable_peer`]) lets its kernels reach the peer's allocations through their
//! ordinary addresses, as peer access does on GPUs. Handle 0 is the null pointer; handles `0xFF0000..` are reserved for LDS pointers (one per
//! LDS array) so the executor can tell the address spaces apart. The offset field is 40 bits
//! and is read as a signed number, so a pointer moved before its allocation stays attributed
//! to it (and is reported as out of bounds).

use crate::SimError;
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

/// Bits of the byte-offset field of an address.
pub(crate) const OFFSET_BITS: u32 = 40;
/// Mask of the byte-offset field.
pub(crate) const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// First handle reserved for LDS arrays (handle = base + array id).
pub(crate) const LDS_HANDLE_BASE: u64 = 0xFF_0000;
/// Largest allocation (the signed 40-bit offset field).
pub(crate) const MAX_ALLOC_BYTES: u64 = 1 << (OFFSET_BITS - 1);

/// Split an address into (handle, signed byte offset).
#[inline]
pub(crate) fn split(addr: u64) -> (u64, i64) {
    let off = addr & OFFSET_MASK;
    let off = ((off << (64 - OFFSET_BITS)) as i64) >> (64 - OFFSET_BITS);
    (addr >> OFFSET_BITS, off)
}

/// Build an address from a handle and a byte offset (wrapping inside the offset field).
#[inline]
pub(crate) fn join(handle: u64, off: i64) -> u64 {
    (handle << OFFSET_BITS) | (off as u64 & OFFSET_MASK)
}

/// One zero-initialised allocation. Accessed through raw pointers from many worker threads:
/// the simulated kernel, like a GPU kernel, is responsible for not racing on plain accesses.
pub(crate) struct Alloc {
    /// Its handle.
    pub handle: u64,
    /// Size in bytes.
    pub len: u64,
    base: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the allocation is plain bytes owned by this struct; concurrent access goes through
// raw-pointer copies and real atomics, mirroring GPU global memory.
unsafe impl Send for Alloc {}
// SAFETY: as above; no `&mut` to the bytes is ever created.
unsafe impl Sync for Alloc {}

impl Alloc {
    fn new(handle: u64, len: u64) -> Result<Alloc, SimError> {
        if len > MAX_ALLOC_BYTES || len > isize::MAX as u64 {
            return Err(SimError::Memory(format!(
                "allocation of {len} bytes exceeds the simulator's limit of {MAX_ALLOC_BYTES}"
            )));
        }
        let layout = Layout::from_size_align(len.max(1) as usize, 16)
            .map_err(|e| SimError::Memory(format!("bad allocation size {len}: {e}")))?;
        // SAFETY: the layout has a non-zero size. Zeroed allocations of large sizes are served
        // lazily by the OS (calloc/mmap), so untouched pages cost nothing.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let base = NonNull::new(p).ok_or_else(|| {
            SimError::Memory(format!("out of host memory allocating {len} bytes"))
        })?;
        Ok(Alloc {
            handle,
            len,
            base,
            layout,
        })
    }

    /// Whether `[off, off + n)` lies inside the allocation.
    #[inline]
    pub fn contains(&self, off: i64, n: u64) -> bool {
        off >= 0
            && (off as u64)
                .checked_add(n)
                .is_some_and(|end| end <= self.len)
    }

    /// Copy `out.len()` bytes from `off`. The caller checked `contains`.
    #[inline]
    pub fn read(&self, off: u64, out: &mut [u8]) {
        debug_assert!(off + out.len() as u64 <= self.len);
        // SAFETY: the range is inside the allocation (checked by the caller), and `out` is a
        // distinct host buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().add(off as usize),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }

    /// Copy `data` to `off`. The caller checked `contains`.
    #[inline]
    pub fn write(&self, off: u64, data: &[u8]) {
        debug_assert!(off + data.len() as u64 <= self.len);
        // SAFETY: the range is inside the allocation (checked by the caller); `data` is a
        // distinct host buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.base.as_ptr().add(off as usize),
                data.len(),
            )
        }
    }

    /// Set `n` bytes at `off` to `byte`. The caller checked `contains`.
    fn fill(&self, off: u64, byte: u8, n: u64) {
        // SAFETY: the range is inside the allocation (checked by the caller).
        unsafe { std::ptr::write_bytes(self.base.as_ptr().add(off as usize), byte, n as usize) }
    }

    /// The 4-byte word at `off` as an atomic, if `off` is 4-byte aligned and in range.
    #[inline]
    pub fn atomic_u32(&self, off: u64) -> Option<&AtomicU32> {
        if off & 3 != 0 || off + 4 > self.len {
            return None;
        }
        // SAFETY: in range and 4-byte aligned (the base is 16-byte aligned); the memory lives
        // as long as `self`, and AtomicU32 has the same layout as u32.
        Some(unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off as usize).cast::<u32>()) })
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        // SAFETY: `base` was returned by `alloc_zeroed` with this very layout.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for Alloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Alloc {{ handle: {}, len: {} }}", self.handle, self.len)
    }
}

#[derive(Debug, Default)]
struct Table {
    live: BTreeMap<u64, Arc<Alloc>>,
    bytes: u64,
}

/// The next allocation handle of the process (shared by every [`SimMemory`]).
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);
/// The next [`SimMemory::id`].
static NEXT_MEMORY_ID: AtomicU64 = AtomicU64::new(1);
/// Every live memory's table by id, for [`SimMemory::enable_peer`].
static MEMORIES: Mutex<BTreeMap<u64, Weak<RwLock<Table>>>> = Mutex::new(BTreeMap::new());

/// Device memory of the simulator. Thread-safe (`Sync`): workgroups of a launch and host
/// copies may use it from several threads.
///
/// ```
/// let mem = flydsl_sim::SimMemory::new();
/// let a = mem.alloc(16).unwrap();
/// mem.write(a + 4, &[1, 2, 3]).unwrap();
/// let mut out = [9u8; 8];
/// mem.read(a, &mut out).unwrap();
/// assert_eq!(out, [0, 0, 0, 0, 1, 2, 3, 0]);
/// mem.free(a).unwrap();
/// ```
#[derive(Debug)]
pub struct SimMemory {
    id: u64,
    table: Arc<RwLock<Table>>,
    /// The memories whose allocations this memory's kernels may access (peer access).
    peers: RwLock<Vec<(u64, Weak<RwLock<Table>>)>>,
}

impl Default for SimMemory {
    fn default() -> Self {
        let id = NEXT_MEMORY_ID.fetch_add(1, Ordering::Relaxed);
        let table = Arc::new(RwLock::new(Table::default()));
        MEMORIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, Arc::downgrade(&table));
        SimMemory {
            id,
            table,
            peers: RwLock::new(Vec::new()),
        }
    }
}

impl Drop for SimMemory {
    fn drop(&mut self) {
        let mut m = MEMORIES.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(&self.id);
    }
}

impl SimMemory {
    /// New empty memory.
    pub fn new() -> Self {
        SimMemory::default()
    }

    /// This memory's process-unique id (what [`enable_peer`](Self::enable_peer) takes).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Let kernels launched on this memory access the allocations of the live memory `peer`
    /// (its [`id`](Self::id)), as GPU peer access does: the launch snapshot then includes
    /// them, so memcheck bounds-checks those accesses too. Enabling a peer twice, or this
    /// memory itself, is a no-op; an unknown or dropped id is an error.
    ///
    /// ```
    /// use flydsl_sim::SimMemory;
    /// let (a, b) = (SimMemory::new(), SimMemory::new());
    /// a.enable_peer(b.id()).unwrap();
    /// assert!(a.enable_peer(u64::MAX).is_err());
    /// ```
    pub fn enable_peer(&self, peer: u64) -> Result<(), SimError> {
        if peer == self.id {
            return Ok(());
        }
        let table = MEMORIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .cloned()
            .filter(|w| w.strong_count() > 0)
            .ok_or_else(|| {
                SimError::Memory(format!(
                    "enable_peer({peer}): no live Sim memory has that id; pass SimMemory::id() \
                     of a live device"
                ))
            })?;
        let mut peers = self.peers.write().unwrap_or_else(|e| e.into_inner());
        if !peers.iter().any(|(id, _)| *id == peer) {
            peers.push((peer, table));
        }
        Ok(())
    }

    /// Whether [`enable_peer`](Self::enable_peer) was called for `peer` (or it is this memory).
    pub fn peer_enabled(&self, peer: u64) -> bool {
        peer == self.id
            || self
                .peers
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|(id, _)| *id == peer)
    }

    fn table(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocate `bytes` (zero-filled); returns a non-zero device address.
    pub fn alloc(&self, bytes: u64) -> Result<u64, SimError> {
        let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        if handle >= LDS_HANDLE_BASE {
            return Err(SimError::Memory(format!(
                "too many Sim allocations over the life of this process ({handle})"
            )));
        }
        let a = Arc::new(Alloc::new(handle, bytes)?);
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        t.bytes += bytes;
        t.live.insert(handle, a);
        Ok(join(handle, 0))
    }

    /// Free an allocation made by `alloc` (the address must be the one `alloc` returned).
    pub fn free(&self, addr: u64) -> Result<(), SimError> {
        let (h, off) = split(addr);
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        if off != 0 || !t.live.contains_key(&h) {
            return Err(SimError::Memory(format!(
                "free of {addr:#x}: not the start of a live allocation"
            )));
        }
        if let Some(a) = t.live.remove(&h) {
            t.bytes -= a.len;
        }
        Ok(())
    }

    /// Bytes currently allocated.
    pub fn bytes_in_use(&self) -> u64 {
        self.table().bytes
    }

    /// Number of live allocations.
    pub fn allocations(&self) -> usize {
        self.table().live.len()
    }

    /// Size of the allocation containing `addr` and the offset of `addr` in it.
    pub fn allocation_of(&self, addr: u64) -> Option<(u64, u64)> {
        let (h, off) = split(addr);
        let t = self.table();
        let a = t.live.get(&h)?;
        (off >= 0 && off as u64 <= a.len).then_some((a.len, off as u64))
    }

    fn resolve(&self, addr: u64, n: u64, what: &str) -> Result<(Arc<Alloc>, u64), SimError> {
        let (h, off) = split(addr);
        let t = self.table();
        let a = t.live.get(&h).ok_or_else(|| {
            SimError::Memory(format!("{what} at {addr:#x}: no live allocation there"))
        })?;
        if !a.contains(off, n) {
            return Err(SimError::Memory(format!(
                "{what} of {n} bytes at offset {off} overruns the allocation of {} bytes",
                a.len
            )));
        }
        Ok((a.clone(), off as u64))
    }

    /// Copy host bytes to `addr` (may be inside an allocation).
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), SimError> {
        let (a, off) = self.resolve(addr, data.len() as u64, "write")?;
        a.write(off, data);
        Ok(())
    }

    /// Copy bytes at `addr` to the host.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), SimError> {
        let (a, off) = self.resolve(addr, out.len() as u64, "read")?;
        a.read(off, out);
        Ok(())
    }

    /// Set `len` bytes at `addr` to `byte`.
    pub fn fill(&self, addr: u64, byte: u8, len: u64) -> Result<(), SimError> {
        let (a, off) = self.resolve(addr, len, "fill")?;
        a.fill(off, byte, len);
        Ok(())
    }

    /// The live allocations of this memory and of its enabled peers, sorted by handle
    /// (taken once per launch).
    pub(crate) fn snapshot(&self) -> Vec<Arc<Alloc>> {
        let mut all: Vec<Arc<Alloc>> = self.table().live.values().cloned().collect();
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        if peers.is_empty() {
            return all;
        }
        for (_, w) in peers.iter() {
            if let Some(t) = w.upgrade() {
                let t = t.read().unwrap_or_else(|e| e.into_inner());
                all.extend(t.live.values().cloned());
            }
        }
        all.sort_by_key(|a| a.handle);
        all
    }
}

/// Which bytes of one workgroup's LDS the workgroup has written (initcheck): a load or atomic
/// of a byte not yet written reads whatever the previous workgroup left on a GPU, so it is
/// reported instead of reading the simulator's zeros.
#[derive(Debug)]
pub(crate) struct LdsInit {
    written: Vec<bool>,
}

impl LdsInit {
    /// Nothing written, over `bytes` bytes of LDS.
    pub fn new(bytes: usize) -> LdsInit {
        LdsInit {
            written: vec![false; bytes],
        }
    }

    /// Forget every write (a new workgroup starts).
    pub fn reset(&mut self) {
        self.written.fill(false);
    }

    /// Record a write of `n` bytes at `byte` (in range: the caller located the access).
    #[inline]
    pub fn mark(&mut self, byte: usize, n: usize) {
        self.written[byte..byte + n].fill(true);
    }

    /// The first byte of `[byte, byte + n)` never written, if any.
    #[inline]
    pub fn first_unwritten(&self, byte: usize, n: usize) -> Option<usize> {
        self.written[byte..byte + n]
            .iter()
            .position(|&w| !w)
            .map(|i| byte + i)
    }
}

#[cfg(test)]
mod tests {
    use super::LdsInit;

    #[test]
    fn lds_init_tracks_bytes_and_resets() {
        let mut m = LdsInit::new(16);
        assert_eq!(m.first_unwritten(0, 16), Some(0));
        m.mark(4, 4);
        assert_eq!(m.first_unwritten(4, 4), None);
        assert_eq!(m.first_unwritten(2, 4), Some(2));
        assert_eq!(m.first_unwritten(6, 4), Some(8));
        m.reset();
        assert_eq!(m.first_unwritten(4, 1), Some(4));
    }
}
