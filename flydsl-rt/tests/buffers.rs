//! Device buffers on the Sim: copies, ndarray views, lengths and errors.

use flydsl_rt::*;
use ndarray::{arr2, Array3};

fn dev() -> Device {
    Device::new_sim(Target::Gfx942)
}

#[test]
fn round_trips_every_element_type() {
    let d = dev();
    macro_rules! rt {
        ($($v:expr),*) => {$({
            let v = $v;
            let b = DeviceBuffer::from_slice(&d, &v).unwrap();
            assert_eq!(b.to_vec().unwrap(), v);
        })*};
    }
    rt!(
        vec![1.5f32, -2.0, f32::INFINITY],
        vec![half::f16::from_f32(0.5), half::f16::from_f32(-3.0)],
        vec![half::bf16::from_f32(1.0); 3],
        vec![-1i8, 2, 3],
        vec![255u8, 0],
        vec![i32::MIN, 0, i32::MAX],
        vec![u32::MAX],
        vec![i64::MIN, 7],
        vec![F8E4M3FN(0x38), F8E4M3FN(0x7e)],
        vec![F8E4M3FNUZ(0x40), F8E4M3FNUZ(0x80)],
        vec![F8E5M2(0x3c), F8E5M2(0x7c)],
        vec![F8E5M2FNUZ(0x40)]
    );
}

#[test]
fn zeroed_memset_and_copies() {
    let d = dev();
    let mut b = DeviceBuffer::<i32>::zeroed(&d, 5).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![0; 5]);
    b.copy_from_slice(&[1, 2, 3, 4, 5]).unwrap();
    let mut out = [0i32; 5];
    b.copy_to_slice(&mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 5]);
    b.memset_zero().unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![0; 5]);
    assert_eq!(b.size_bytes(), 20);
    assert_eq!(b.device_id(), d.id());
    assert_ne!(b.as_device_ptr(), 0);
}

#[test]
fn length_mismatches_are_errors() {
    let d = dev();
    let mut b = DeviceBuffer::<f32>::zeroed(&d, 4).unwrap();
    let err = b.copy_from_slice(&[1.0; 3]).unwrap_err();
    assert!(
        matches!(err, Error::LengthMismatch { device: 4, host: 3 }),
        "{err}"
    );
    let mut out = [0f32; 5];
    assert!(matches!(
        b.copy_to_slice(&mut out),
        Err(Error::LengthMismatch { .. })
    ));
}

#[test]
fn empty_buffers_allocate_nothing() {
    let d = dev();
    let b = DeviceBuffer::<f32>::zeroed(&d, 0).unwrap();
    assert!(b.is_empty());
    assert_eq!(b.as_device_ptr(), 0);
    assert_eq!(b.to_vec().unwrap(), Vec::<f32>::new());
}

#[test]
fn oversized_allocations_are_errors_not_panics() {
    let d = dev();
    let err = DeviceBuffer::<f32>::alloc(&d, usize::MAX / 2).unwrap_err();
    assert!(matches!(err, Error::SizeOverflow { .. }), "{err}");
}

#[test]
fn ndarray_views_standard_and_strided() {
    let d = dev();
    let a = arr2(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let b = DeviceBuffer::from_array(&d, a.view()).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let t = DeviceBuffer::from_array(&d, a.t()).unwrap();
    assert_eq!(t.to_vec().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let back = t.to_array((3, 2)).unwrap();
    assert_eq!(back, a.t());
    assert!(matches!(
        t.to_array((4, 2)),
        Err(Error::ShapeMismatch { len: 6, .. })
    ));
    let cube = Array3::<i32>::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
    let mut c = DeviceBuffer::<i32>::zeroed(&d, 24).unwrap();
    c.copy_from_array(cube.view()).unwrap();
    assert_eq!(c.to_array((2, 3, 4)).unwrap(), cube);
}

#[test]
#[ignore = "allocates and copies 4.5 GiB of host and Sim memory"]
fn buffers_past_4_gib() {
    let d = dev();
    let len = (4usize << 30) + 512;
    let mut b = DeviceBuffer::<u8>::zeroed(&d, len).unwrap();
    assert_eq!(b.size_bytes(), len as u64);
    let mut host = vec![0u8; len];
    host[len - 1] = 9;
    b.copy_from_slice(&host).unwrap();
    let back = b.to_vec().unwrap();
    assert_eq!(back[len - 1], 9);
}
