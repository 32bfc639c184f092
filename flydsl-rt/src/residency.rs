//! Stream-ordered buffer lifetimes: for each device buffer, the one stream whose queue covers
//! all the device work the buffer has taken part in (its *owner*).
//!
//! A buffer starts owned by the device's default stream (CUDA's legacy stream, HIP's null
//! stream), on which it was allocated and on which the blocking copies run. When a launch or
//! an enqueued copy uses it on another stream, that stream first waits (device-side, an event)
//! for the owner's queue and becomes the owner; a blocking copy moves ownership back to the
//! default stream the same way. The free at drop is then enqueued on the owner
//! (`cuMemFreeAsync` / `hipFreeAsync`), so dropping a buffer never waits on the host, and never
//! frees memory that queued work may still touch. After the work is enqueued, `release`
//! checks that no other stream took the buffer over in between (two threads using `&buffer`
//! at once), else that owner also waits for this stream. Within one stream nothing is
//! recorded after the first use, so the usual launch costs two uncontended locks per buffer.
//!
//! The price of one owner: a buffer used on two streams in turn orders the second use after
//! the first (also for two readers). cudarc's `CudaSlice` follows the same idea with separate
//! read and write events; one owner is simpler and never wrong, only sometimes stricter.

use crate::backend::{RawDevice, RawStream};
use crate::error::Result;
use crate::types::StreamId;
use std::sync::{Arc, Mutex};

/// The stream that owns a buffer.
#[derive(Clone, Debug, Default)]
pub(crate) enum Owner {
    /// The device's default stream.
    #[default]
    Default,
    /// A stream of this device (kept alive until the buffer's free is enqueued on it).
    Stream(StreamId, Arc<RawStream>),
}

impl Owner {
    /// The owner's raw stream (`None`: the default stream).
    pub(crate) fn raw(&self) -> Option<&RawStream> {
        match self {
            Owner::Default => None,
            Owner::Stream(_, s) => Some(s),
        }
    }
}

/// A buffer's owner, shared with the [`KernelArgs`](crate::KernelArgs) it is pushed into.
#[derive(Debug, Default)]
pub(crate) struct Residency {
    owner: Mutex<Owner>,
    /// Owners of memory reached through this buffer (a tensor map's tensor), acquired with it.
    links: Vec<Arc<Residency>>,
}

impl Residency {
    fn lock(&self) -> std::sync::MutexGuard<'_, Owner> {
        self.owner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An owner record that also acquires `links` whenever it is acquired.
    pub(crate) fn linked(links: Vec<Arc<Residency>>) -> Residency {
        Residency {
            owner: Mutex::default(),
            links,
        }
    }

    /// Order the next work on `stream` after all work on the buffer (and its links) so far
    /// and make `stream` the owner.
    pub(crate) fn acquire(
        &self,
        dev: &RawDevice,
        id: StreamId,
        stream: &Arc<RawStream>,
    ) -> Result<()> {
        for l in &self.links {
            l.acquire(dev, id, stream)?;
        }
        let mut owner = self.lock();
        if matches!(&*owner, Owner::Stream(cur, _) if *cur == id) {
            return Ok(());
        }
        dev.order(owner.raw(), Some(stream))?;
        *owner = Owner::Stream(id, Arc::clone(stream));
        Ok(())
    }

    /// After work on `stream` that [`acquire`](Self::acquire)d the buffer was enqueued: if
    /// another stream took the buffer over in between (a use from another thread holding
    /// `&buffer` too), make that owner wait for `stream` as well, so that the owner's queue
    /// still covers all work on the buffer.
    pub(crate) fn release(
        &self,
        dev: &RawDevice,
        id: StreamId,
        stream: &Arc<RawStream>,
    ) -> Result<()> {
        for l in &self.links {
            l.release(dev, id, stream)?;
        }
        let owner = self.lock();
        match &*owner {
            Owner::Stream(cur, _) if *cur == id => Ok(()),
            other => dev.order(Some(stream), other.raw()),
        }
    }

    /// Order the next work on the default stream after all work on the buffer so far and make
    /// it the owner (before a blocking copy, which completes before it returns or holds the
    /// buffer exclusively).
    pub(crate) fn acquire_default(&self, dev: &RawDevice) -> Result<()> {
        for l in &self.links {
            l.acquire_default(dev)?;
        }
        let mut owner = self.lock();
        if let Owner::Stream(_, s) = &*owner {
            dev.order(Some(s), None)?;
            *owner = Owner::Default;
        }
        Ok(())
    }

    /// Make `stream` the owner of a buffer that no work has used yet (one allocated on it).
    pub(crate) fn set_owner(&self, id: StreamId, stream: &Arc<RawStream>) {
        *self.lock() = Owner::Stream(id, Arc::clone(stream));
    }

    /// The owning stream's id (`None`: the default stream).
    pub(crate) fn owner_id(&self) -> Option<StreamId> {
        match &*self.lock() {
            Owner::Default => None,
            Owner::Stream(id, _) => Some(*id),
        }
    }

    /// The owner, leaving the default stream in its place (at the buffer's drop).
    pub(crate) fn take(&self) -> Owner {
        std::mem::take(&mut *self.lock())
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use super::Residency;
    use crate::device::Device;
    use flydsl_ir::Target;
    use std::sync::Arc;

    #[test]
    fn release_leaves_a_newer_owner_and_links_follow() {
        let dev = Device::new_sim(Target::Gfx942);
        let raw = &dev.inner.raw;
        let (a, b) = (dev.stream().unwrap(), dev.stream().unwrap());
        let parent = Arc::new(Residency::default());
        let view = Residency::linked(vec![Arc::clone(&parent)]);
        view.acquire(raw, a.id, &a.raw).unwrap();
        assert_eq!(
            (view.owner_id(), parent.owner_id()),
            (Some(a.id), Some(a.id))
        );
        // Another thread's use on `b` lands between this use's acquire and release.
        parent.acquire(raw, b.id, &b.raw).unwrap();
        view.release(raw, a.id, &a.raw).unwrap();
        assert_eq!(parent.owner_id(), Some(b.id));
        assert_eq!(view.owner_id(), Some(a.id));
        parent.acquire_default(raw).unwrap();
        assert_eq!(parent.owner_id(), None);
        assert!(view.take().raw().is_some());
        assert_eq!(view.owner_id(), None);
    }
}
