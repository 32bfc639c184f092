//! Kernel arguments: [`KernelArgs`], the packed buffer generated launchers fill, and its check
//! against the kernel's kernarg layout.

use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::repr::{as_bytes, DeviceRepr};
use crate::residency::Residency;
use crate::types::DeviceId;
use flydsl_ir::KernargLayout;
use std::sync::Arc;

#[derive(Clone, Copy, Debug)]
struct Push {
    offset: usize,
    size: usize,
    pointer: bool,
    /// The buffer's device, for the pointer of a tensor.
    device: Option<DeviceId>,
}

/// A packed kernel-argument buffer plus the devices of the buffers pushed into it and their
/// stream-order records (the launch orders itself after their earlier work: see
/// [`DeviceBuffer`]).
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
    /// The device of `devices[0]` and those of the rest (to name them in errors; kept apart
    /// so that the usual launch, on one device, allocates nothing for them).
    first_owner: Option<Device>,
    other_owners: Vec<Device>,
    pushes: Vec<Push>,
    overflow: Option<String>,
    /// The pushed buffers' owners, which the launch moves to its stream (`residency.rs`).
    residencies: Vec<Arc<Residency>>,
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
            first_owner: None,
            other_owners: Vec::new(),
            // A slot is at least 4 bytes: one allocation covers every push of a launcher.
            pushes: Vec::with_capacity(size.div_ceil(4).min(64)),
            overflow: None,
            residencies: Vec::new(),
        }
    }

    fn write(&mut self, offset: usize, data: &[u8], pointer: bool, device: Option<DeviceId>) {
        let end = offset.checked_add(data.len());
        match end {
            Some(end) if end <= self.bytes.len() => {
                self.bytes[offset..end].copy_from_slice(data);
                self.pushes.push(Push {
                    offset,
                    size: data.len(),
                    pointer,
                    device,
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
        let id = buf.device_id();
        self.write(offset, &buf.as_device_ptr().to_le_bytes(), true, Some(id));
        let r = buf.residency();
        if !self.residencies.iter().any(|x| Arc::ptr_eq(x, r)) {
            self.residencies.push(Arc::clone(r));
        }
        let len = i64::try_from(buf.len()).unwrap_or(i64::MAX);
        self.write(offset.saturating_add(8), &len.to_le_bytes(), false, None);
        if !self.devices.contains(&id) {
            self.devices.push(id);
            match self.first_owner {
                None => self.first_owner = Some(buf.device().clone()),
                Some(_) => self.other_owners.push(buf.device().clone()),
            }
        }
    }

    /// Write a tensor argument that is not a [`DeviceBuffer`]: the device address `ptr` at
    /// `offset` and the element count `len` at `offset + 8`. For memory the launch's device
    /// reaches that no buffer of it owns (a peer's [`SharedMemory`](crate::SharedMemory), an
    /// IPC mapping): no device check and no stream ordering apply to it; the launch's safety
    /// contract covers its validity.
    ///
    /// ```
    /// let mut args = flydsl_rt::KernelArgs::new(16);
    /// args.raw_tensor(0, 0x1000, 4);
    /// assert_eq!(&args.bytes()[8..16], &4i64.to_le_bytes());
    /// ```
    pub fn raw_tensor(&mut self, offset: usize, ptr: u64, len: i64) {
        self.write(offset, &ptr.to_le_bytes(), true, None);
        self.write(offset.saturating_add(8), &len.to_le_bytes(), false, None);
    }

    /// Write `v`'s bytes at `offset`.
    ///
    /// ```
    /// let mut args = flydsl_rt::KernelArgs::new(8);
    /// args.scalar(4, 7i32);
    /// assert_eq!(args.bytes(), &[0, 0, 0, 0, 7, 0, 0, 0]);
    /// ```
    pub fn scalar<T: DeviceRepr>(&mut self, offset: usize, v: T) {
        self.write(offset, as_bytes(std::slice::from_ref(&v)), false, None);
    }

    /// The packed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The owners of the buffers pushed so far.
    pub(crate) fn residencies(&self) -> &[Arc<Residency>] {
        &self.residencies
    }

    /// The devices of the buffers pushed so far.
    pub fn devices(&self) -> &[DeviceId] {
        &self.devices
    }

    /// Check the pushes against `layout`: every slot written once or more with its own kind
    /// and size, nothing written between slots.
    pub(crate) fn check(&self, layout: &KernargLayout) -> std::result::Result<(), String> {
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

    /// The offset of the first tensor pushed from another device than `device`, and that
    /// device.
    pub(crate) fn foreign_tensor(&self, device: &Device) -> Option<(usize, &Device)> {
        let id = device.id();
        let p = self
            .pushes
            .iter()
            .find(|p| p.device.is_some_and(|d| d != id))?;
        let owner = self
            .first_owner
            .iter()
            .chain(&self.other_owners)
            .find(|d| Some(d.id()) == p.device)?;
        Some((p.offset, owner))
    }
}
