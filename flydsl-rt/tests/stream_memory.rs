//! Stream-ordered memory, enqueued copies and foreign memory on the Sim: which stream owns a
//! buffer after each use, that copies and launches across streams give the right results,
//! and the argument checks of the enqueued copies and of `DeviceBuffer::from_raw_parts`.

mod common;

use common::*;
use flydsl_ir::Target;
use flydsl_rt::*;

fn vadd_launch(
    s: &Stream,
    table: &'static KernelVariants,
    size: usize,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &DeviceBuffer<f32>,
) {
    let mut args = KernelArgs::new(size);
    args.tensor(0, a);
    args.tensor(16, b);
    args.tensor(32, c);
    let n = c.len() as u64;
    // SAFETY: the kernel guards its index with c.len and a, b, c have at least c.len elements.
    unsafe { s.launch(table, LaunchConfig::for_elements(n, 64), &args) }.unwrap();
}

const TARGETS: [Target; 5] = [
    Target::Gfx942,
    Target::Gfx950,
    Target::Gfx1201,
    Target::Gfx1250,
    Target::Sm90,
];

#[test]
fn ownership_follows_the_last_stream() {
    for target in TARGETS {
        let dev = Device::new_sim(target);
        let k = vadd(target, 256);
        let size = k.kernarg_layout().size as usize;
        let table = table("t", vec![(k, None)]);
        let (s1, s2) = (dev.stream().unwrap(), dev.stream().unwrap());
        let a = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0, 3.0]).unwrap();
        let c = DeviceBuffer::<f32>::zeroed(&dev, 3).unwrap();
        assert_eq!((a.owner_stream(), c.owner_stream()), (None, None));
        vadd_launch(&s1, table, size, &a, &a, &c);
        assert_eq!(a.owner_stream(), Some(s1.id()));
        assert_eq!(c.owner_stream(), Some(s1.id()));
        vadd_launch(&s2, table, size, &c, &a, &c);
        assert_eq!(c.owner_stream(), Some(s2.id()));
        assert_eq!(a.owner_stream(), Some(s2.id()));
        // A blocking copy moves the buffer back to the default stream.
        assert_eq!(c.to_vec().unwrap(), vec![3.0, 6.0, 9.0]);
        assert_eq!(c.owner_stream(), None);
        assert_eq!(a.owner_stream(), Some(s2.id()));
    }
}

#[test]
fn a_buffer_allocated_on_a_stream_starts_owned_by_it() {
    for target in TARGETS {
        let dev = Device::new_sim(target);
        let k = vadd(target, 256);
        let size = k.kernarg_layout().size as usize;
        let table = table("t", vec![(k, None)]);
        let (s1, s2) = (dev.stream().unwrap(), dev.stream().unwrap());
        let a = DeviceBuffer::from_slice(&dev, &[1.0f32, 2.0, 3.0]).unwrap();
        let c = s1.alloc::<f32>(3).unwrap();
        assert_eq!(c.owner_stream(), Some(s1.id()));
        assert_eq!(s2.alloc::<f32>(0).unwrap().len(), 0);
        vadd_launch(&s1, table, size, &a, &a, &c);
        assert_eq!(c.owner_stream(), Some(s1.id()));
        // Another stream takes it over as it would any buffer; the result is s1's.
        vadd_launch(&s2, table, size, &c, &a, &c);
        assert_eq!(c.owner_stream(), Some(s2.id()));
        assert_eq!(c.to_vec().unwrap(), vec![3.0, 6.0, 9.0]);
        // Dropped while its stream's work may be queued: the free waits for it there.
        let d = s2.alloc::<f32>(3).unwrap();
        vadd_launch(&s2, table, size, &a, &a, &d);
        drop(d);
    }
    let errors: Vec<String> = diag::drop_errors();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn dropping_in_use_buffers_and_their_stream_frees_them() {
    let dev = Device::new_sim(Target::Gfx942);
    let k = vadd(Target::Gfx942, 256);
    let size = k.kernarg_layout().size as usize;
    let table = table("t", vec![(k, None)]);
    let out = DeviceBuffer::<f32>::zeroed(&dev, 1000).unwrap();
    for round in 0..50 {
        let s = dev.stream().unwrap();
        let a = DeviceBuffer::from_slice(&dev, &vec![round as f32; 1000]).unwrap();
        vadd_launch(&s, table, size, &a, &a, &out);
        // The stream goes first: the buffer keeps its queue alive for its free.
        drop(s);
        drop(a);
    }
    assert_eq!(out.to_vec().unwrap(), vec![98.0; 1000]);
    let errors: Vec<String> = diag::drop_errors();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn enqueued_copies_and_launches_keep_their_order_across_streams() {
    for target in TARGETS {
        let dev = Device::new_sim(target);
        let k = vadd(target, 256);
        let size = k.kernarg_layout().size as usize;
        let table = table("t", vec![(k, None)]);
        let (s1, s2) = (dev.stream().unwrap(), dev.stream().unwrap());
        let n = 777;
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
        let mut host = PinnedHostBuffer::from_slice(&dev, &x).unwrap();
        let mut a = DeviceBuffer::<f32>::alloc(&dev, n).unwrap();
        let mut b = DeviceBuffer::<f32>::alloc(&dev, n).unwrap();
        let c = DeviceBuffer::<f32>::alloc(&dev, n).unwrap();
        s1.copy_to_device(&host, &mut a).unwrap();
        s2.copy_device(&a, &mut b).unwrap(); // waits for s1's copy
        vadd_launch(&s1, table, size, &a, &b, &c); // waits for s2's copy
                                                   // Overwrite the pinned source: waits for the copy that read it.
        host.as_mut_slice()
            .unwrap()
            .iter_mut()
            .for_each(|v| *v = -1.0);
        let mut back = PinnedHostBuffer::<f32>::zeroed(&dev, n).unwrap();
        s2.copy_to_host(&c, &mut back).unwrap();
        let want: Vec<f32> = x.iter().map(|v| v + v).collect();
        assert_eq!(back.as_slice().unwrap(), &want[..], "{target}");
        s1.copy_to_device(&host, &mut a).unwrap();
        s1.copy_to_host(&a, &mut back).unwrap();
        assert_eq!(back.as_slice().unwrap(), &vec![-1.0; n][..], "{target}");
    }
}

#[test]
fn enqueued_copies_check_lengths_and_devices() {
    let dev = Device::new_sim(Target::Gfx942);
    let other = Device::new_sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let host = PinnedHostBuffer::<u8>::zeroed(&dev, 4).unwrap();
    let mut host3 = PinnedHostBuffer::<u8>::zeroed(&dev, 3).unwrap();
    let mut d4 = DeviceBuffer::<u8>::zeroed(&dev, 4).unwrap();
    let mut d3 = DeviceBuffer::<u8>::zeroed(&dev, 3).unwrap();
    let mut elsewhere = DeviceBuffer::<u8>::zeroed(&other, 4).unwrap();
    let e = s.copy_to_device(&host, &mut d3).unwrap_err().to_string();
    assert!(
        e.contains("Stream::copy_to_device") && e.contains("4 and 3"),
        "{e}"
    );
    let e = s.copy_to_host(&d4, &mut host3).unwrap_err().to_string();
    assert!(
        e.contains("Stream::copy_to_host") && e.contains("4 and 3"),
        "{e}"
    );
    let e = s.copy_device(&d4, &mut d3).unwrap_err().to_string();
    assert!(e.contains("Stream::copy_device"), "{e}");
    let e = s.copy_to_device(&host, &mut elsewhere).unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch { .. }), "{e}");
    let other_host = PinnedHostBuffer::<u8>::zeroed(&other, 4).unwrap();
    assert!(matches!(
        s.copy_to_device(&other_host, &mut d4),
        Err(Error::DeviceMismatch { .. })
    ));
    // Nothing was written by the failed calls.
    assert_eq!(d3.to_vec().unwrap(), vec![0; 3]);
    assert_eq!(elsewhere.to_vec().unwrap(), vec![0; 4]);
    // Empty copies are no-ops.
    let h0 = PinnedHostBuffer::<u8>::zeroed(&dev, 0).unwrap();
    let mut d0 = DeviceBuffer::<u8>::alloc(&dev, 0).unwrap();
    s.copy_to_device(&h0, &mut d0).unwrap();
    assert!(h0.as_slice().unwrap().is_empty());
}

#[test]
fn foreign_memory_is_validated_and_never_freed() {
    let dev = Device::new_sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let owner = DeviceBuffer::from_slice(&dev, &[10i32, 11, 12, 13, 14, 15]).unwrap();
    let p = owner.as_device_ptr();
    let wrap = |ptr: u64, len: usize| {
        // SAFETY: only ranges inside `owner` are accepted, and `owner` outlives every view;
        // the views are only read.
        unsafe { DeviceBuffer::<i32>::from_raw_parts(&s, ptr, len) }
    };
    let msg = |r: Result<DeviceBuffer<i32>>| r.unwrap_err().to_string();
    let e = msg(wrap(0, 3));
    assert!(
        e.contains("DeviceBuffer::from_raw_parts") && e.contains("null"),
        "{e}"
    );
    let e = msg(wrap(p + 2, 1));
    assert!(e.contains("not aligned to 4 bytes"), "{e}");
    let e = msg(wrap(p + 8, 5));
    assert!(e.contains("not inside one allocation"), "{e}");
    let e = msg(wrap(u64::MAX - 3, 2));
    assert!(e.contains("overflows"), "{e}");
    assert!(matches!(
        wrap(p, usize::MAX / 2),
        Err(Error::SizeOverflow { .. })
    ));
    // An address of no live allocation (a handle this device never gave out).
    let e = msg(wrap(0xABCD << 40, 1));
    assert!(e.contains("not in any live allocation"), "{e}");
    let view = wrap(p + 8, 3).unwrap();
    assert!(!view.is_owned());
    assert_eq!(view.owner_stream(), Some(s.id()));
    assert_eq!(view.to_vec().unwrap(), vec![12, 13, 14]);
    drop(view);
    // The view's drop freed nothing: the owner is intact.
    assert_eq!(owner.to_vec().unwrap(), vec![10, 11, 12, 13, 14, 15]);
    assert!(wrap(0, 0).unwrap().is_empty());
    // Streams of other backends are refused on the Sim.
    // SAFETY: the call fails before the handle is used.
    let e = unsafe { Stream::from_raw_cuda(&dev, std::ptr::null_mut()) }.unwrap_err();
    assert!(e.to_string().contains("Stream::from_raw_cuda"), "{e}");
    // SAFETY: as above.
    assert!(unsafe { Stream::from_raw_hip(&dev, std::ptr::null_mut()) }.is_err());
}

#[test]
fn a_kernel_writes_a_row_block_of_foreign_memory() {
    for target in TARGETS {
        let dev = Device::new_sim(target);
        let k = vadd(target, 256);
        let size = k.kernarg_layout().size as usize;
        let table = table("t", vec![(k, None)]);
        let s = dev.stream().unwrap();
        let (rows, cols) = (5usize, 33usize);
        let x: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let m = DeviceBuffer::from_slice(&dev, &x).unwrap();
        let base = m.as_device_ptr();
        let row = |r: usize, n: usize| {
            // SAFETY: rows of `m`, which outlives the views; rows 1..3 (read) and 3 (written)
            // do not overlap.
            unsafe { DeviceBuffer::<f32>::from_raw_parts(&s, base + (r * cols * 4) as u64, n) }
                .unwrap()
        };
        let (a, out) = (row(1, cols), row(3, cols));
        vadd_launch(&s, table, size, &a, &a, &out);
        drop((a, out));
        let got = m.to_vec().unwrap();
        for (i, v) in got.iter().enumerate() {
            let want = if i / cols == 3 {
                2.0 * x[i - 2 * cols]
            } else {
                x[i]
            };
            assert_eq!(*v, want, "{target} element {i}");
        }
    }
}

#[test]
fn a_tensor_map_carries_its_tensor_into_the_stream_order() {
    let dev = Device::new_sim(Target::Sm90);
    let s = dev.stream().unwrap();
    let a = DeviceBuffer::<half::bf16>::zeroed(&dev, 100 * 64).unwrap();
    let map = TensorMap::tiled(&a, &[64, 100], &[64], &[64, 8], TmaSwizzle::B128).unwrap();
    assert_eq!(a.owner_stream(), None);
    // Any use of the map's buffer on a stream (a launch, here an enqueued copy) also orders
    // the tensor the kernel reads through it.
    let mut copy = DeviceBuffer::<i8>::zeroed(&dev, 128).unwrap();
    s.copy_device(map.buffer(), &mut copy).unwrap();
    assert_eq!(a.owner_stream(), Some(s.id()));
    assert_eq!(copy.to_vec().unwrap(), map.buffer().to_vec().unwrap());
    // A second map of the same tensor (served from the cache) does the same on another stream.
    let s2 = dev.stream().unwrap();
    let again = TensorMap::tiled(&a, &[64, 100], &[64], &[64, 8], TmaSwizzle::B128).unwrap();
    s2.copy_device(again.buffer(), &mut copy).unwrap();
    assert_eq!(a.owner_stream(), Some(s2.id()));
}

#[test]
fn slices_feed_kernels_and_order_their_buffer() {
    for target in TARGETS {
        let dev = Device::new_sim(target);
        let k = vadd(target, 256);
        let size = k.kernarg_layout().size as usize;
        let table = table("t", vec![(k, None)]);
        let s = dev.stream().unwrap();
        let (rows, cols) = (6usize, 19usize);
        let x: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5).collect();
        let m = DeviceBuffer::from_slice(&dev, &x).unwrap();
        let out = DeviceBuffer::<f32>::zeroed(&dev, 2 * cols).unwrap();
        {
            let block = m.slice(3 * cols..5 * cols).unwrap();
            let first = m.slice(0..2 * cols).unwrap();
            vadd_launch(&s, table, size, &block, &first, &out);
            assert_eq!(block.owner_stream(), Some(s.id()));
        }
        // The launch through the slices moved the buffer's own owner.
        assert_eq!(m.owner_stream(), Some(s.id()));
        let got = out.to_vec().unwrap();
        for (i, v) in got.iter().enumerate() {
            assert_eq!(*v, x[3 * cols + i] + x[i], "{target} element {i}");
        }
    }
    let dev = Device::new_sim(Target::Gfx942);
    let m = DeviceBuffer::<u8>::zeroed(&dev, 4).unwrap();
    let e = m.slice(3..5).unwrap_err().to_string();
    assert!(
        e.contains("DeviceBuffer::slice") && e.contains("3..5"),
        "{e}"
    );
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = m.slice(3..2);
    assert!(reversed.is_err());
    assert!(m.slice(4..4).unwrap().is_empty());
}
