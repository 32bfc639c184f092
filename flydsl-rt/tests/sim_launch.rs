//! Launches of hand-built IR kernels on Sim devices, and the launch validation errors.

mod common;

use common::*;
use flydsl_ir::Target;
use flydsl_rt::*;

fn vadd_args(
    k: &flydsl_ir::Kernel,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &DeviceBuffer<f32>,
) -> KernelArgs {
    let layout = k.kernarg_layout();
    let mut args = KernelArgs::new(layout.size as usize);
    args.tensor(0, a);
    args.tensor(16, b);
    args.tensor(32, c);
    args
}

fn run_vadd(target: Target, n: usize, block: u32) {
    let dev = Device::new_sim(target);
    let stream = dev.stream().unwrap();
    let k = vadd(target, 256);
    let table = table("demo", vec![(k.clone(), None)]);
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.5 * i as f32 + 1.0).collect();
    let da = DeviceBuffer::from_slice(&dev, &a).unwrap();
    let db = DeviceBuffer::from_slice(&dev, &b).unwrap();
    let dc = DeviceBuffer::<f32>::zeroed(&dev, n).unwrap();
    let args = vadd_args(&k, &da, &db, &dc);
    // SAFETY: the kernel guards its index with c.len and a, b, c have equal lengths.
    unsafe { stream.launch(table, LaunchConfig::for_elements(n as u64, block), &args) }.unwrap();
    stream.synchronize().unwrap();
    let c = dc.to_vec().unwrap();
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
}

#[test]
fn vadd_wave64_with_tail() {
    run_vadd(Target::Gfx942, 1000, 256);
}

#[test]
fn vadd_wave32_odd_sizes() {
    run_vadd(Target::Gfx1201, 1, 32);
    run_vadd(Target::Gfx1201, 97, 64);
}

#[test]
fn scalars_are_packed_at_their_offsets() {
    let dev = Device::new_sim(Target::Gfx950);
    let stream = dev.stream().unwrap();
    let k = saxpy_iota(Target::Gfx950);
    let layout = k.kernarg_layout();
    assert_eq!(layout.size, 40);
    let table = table("demo", vec![(k, None)]);
    let x: Vec<f32> = (0..300).map(|i| (i % 7) as f32).collect();
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let dy = DeviceBuffer::<f32>::zeroed(&dev, 300).unwrap();
    let mut args = KernelArgs::new(40);
    args.tensor(0, &dx);
    args.tensor(16, &dy);
    args.scalar(32, 2.0f32);
    args.scalar(36, 250i32);
    // SAFETY: guarded by count <= len.
    unsafe { stream.launch(table, LaunchConfig::linear(2, 256), &args) }.unwrap();
    let y = dy.to_vec().unwrap();
    for i in 0..300 {
        let want = if i < 250 { 2.0 * x[i] + i as f32 } else { 0.0 };
        assert_eq!(y[i], want, "element {i}");
    }
}

#[test]
fn zero_grid_is_a_noop() {
    let dev = Device::new_sim(Target::Gfx942);
    let stream = dev.stream().unwrap();
    let k = vadd(Target::Gfx942, 256);
    let table = table("demo", vec![(k.clone(), None)]);
    let da = DeviceBuffer::from_slice(&dev, &[1.0f32; 8]).unwrap();
    let dc = DeviceBuffer::from_slice(&dev, &[7.0f32; 8]).unwrap();
    let args = vadd_args(&k, &da, &da, &dc);
    for grid in [[0, 1, 1], [4, 0, 1], [4, 1, 0]] {
        let cfg = LaunchConfig {
            grid,
            block: [64, 1, 1],
            dynamic_lds_bytes: 0,
        };
        // SAFETY: nothing runs.
        unsafe { stream.launch(table, cfg, &args) }.unwrap();
    }
    assert_eq!(dc.to_vec().unwrap(), vec![7.0; 8]);
}

#[test]
fn zero_grid_never_reaches_the_backend() {
    // Needs no Sim memory: an argument-less kernel with an empty grid returns before launching.
    let dev = Device::new_sim(Target::Gfx942);
    let table = table("demo", vec![(noop(Target::Gfx942), None)]);
    let s = dev.stream().unwrap();
    // SAFETY: nothing runs.
    unsafe { s.launch(table, LaunchConfig::linear(0, 64), &KernelArgs::new(0)) }.unwrap();
}

#[test]
fn wrong_kernarg_size_is_rejected() {
    let dev = Device::new_sim(Target::Gfx942);
    let table = table("demo", vec![(vadd(Target::Gfx942, 256), None)]);
    let s = dev.stream().unwrap();
    // SAFETY: rejected before launching.
    let err =
        unsafe { s.launch(table, LaunchConfig::linear(1, 64), &KernelArgs::new(40)) }.unwrap_err();
    assert!(matches!(err, Error::KernelArgs { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("40") && msg.contains("48"), "{msg}");
}

#[test]
fn write_past_the_end_is_reported_not_panicking() {
    let dev = Device::new_sim(Target::Gfx942);
    let table = table("demo", vec![(noop(Target::Gfx942), None)]);
    let mut args = KernelArgs::new(0);
    args.scalar(4, 1u32);
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, LaunchConfig::linear(1, 64), &args)
    }
    .unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
}

#[test]
fn block_limits_are_enforced() {
    let dev = Device::new_sim(Target::Gfx942);
    let table = table("demo", vec![(vadd(Target::Gfx942, 256), None)]);
    let s = dev.stream().unwrap();
    for block in [[512, 1, 1], [16, 16, 2], [0, 1, 1], [u32::MAX, u32::MAX, 2]] {
        let cfg = LaunchConfig {
            grid: [1, 1, 1],
            block,
            dynamic_lds_bytes: 0,
        };
        // SAFETY: rejected before launching.
        let err = unsafe { s.launch(table, cfg, &KernelArgs::new(48)) }.unwrap_err();
        assert!(
            matches!(err, Error::InvalidLaunch { .. }),
            "{block:?}: {err}"
        );
        assert!(err.to_string().contains("1..=256"), "{err}");
    }
}

#[test]
fn huge_amd_grid_is_rejected() {
    let dev = Device::new_sim(Target::Gfx942);
    let table = table("demo", vec![(vadd(Target::Gfx942, 256), None)]);
    let cfg = LaunchConfig {
        grid: [u32::MAX, 1, 1],
        block: [256, 1, 1],
        dynamic_lds_bytes: 0,
    };
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, cfg, &KernelArgs::new(48))
    }
    .unwrap_err();
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");
}

#[test]
fn missing_variant_names_built_targets_and_feature() {
    let dev = Device::new_sim(Target::Gfx942);
    static FAKE_CODE: [u8; 4] = [1, 2, 3, 4];
    let table = table(
        "fly-demo",
        vec![
            (vadd(Target::Gfx950, 256), Some(&FAKE_CODE[..])),
            (vadd(Target::Sm90, 256), Some(&FAKE_CODE[..])),
        ],
    );
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, LaunchConfig::linear(1, 64), &KernelArgs::new(48))
    }
    .unwrap_err();
    assert!(matches!(err, Error::MissingVariant { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("[gfx950, sm90]"), "{msg}");
    assert!(
        msg.contains("fly-demo = { features = [\"gfx942\"] }"),
        "{msg}"
    );
}

#[test]
fn mismatched_ir_is_a_bad_variant() {
    let dev = Device::new_sim(Target::Gfx942);
    let mut k = vadd(Target::Gfx950, 256);
    let ir = leak(flydsl_ir::to_bytes(&k));
    k.target = Target::Gfx942;
    let variants = Box::leak(Box::new([KernelVariant {
        target: Target::Gfx942,
        code: None,
        ir,
    }]));
    let table: &'static KernelVariants = Box::leak(Box::new(KernelVariants {
        name: "vadd",
        crate_name: "demo",
        variants,
    }));
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, LaunchConfig::linear(1, 64), &KernelArgs::new(48))
    }
    .unwrap_err();
    assert!(matches!(err, Error::BadVariant { .. }), "{err}");
    let garbage: &'static [u8] = &[0xff; 3];
    let variants = Box::leak(Box::new([KernelVariant {
        target: Target::Gfx942,
        code: None,
        ir: garbage,
    }]));
    let table: &'static KernelVariants = Box::leak(Box::new(KernelVariants {
        name: "vadd",
        crate_name: "demo",
        variants,
    }));
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, LaunchConfig::linear(1, 64), &KernelArgs::new(48))
    }
    .unwrap_err();
    assert!(matches!(err, Error::BadVariant { .. }), "{err}");
}

#[test]
fn lds_over_the_device_limit_is_rejected() {
    let dev = Device::new_sim(Target::Gfx942);
    let mut k = noop(Target::Gfx942);
    k.lds.push(flydsl_ir::LdsArray {
        name: "big".into(),
        elem: flydsl_ir::ScalarType::F32,
        len: 20_000,
        offset: 0,
        align: 16,
    });
    let table = table("demo", vec![(k, None)]);
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, LaunchConfig::linear(1, 64), &KernelArgs::new(0))
    }
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::LdsTooLarge {
                bytes: 80_000,
                limit: 65_536,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn buffers_of_another_device_are_rejected() {
    let dev = Device::new_sim(Target::Gfx942);
    let other = Device::new_sim(Target::Gfx942);
    let k = vadd(Target::Gfx942, 256);
    let table = table("demo", vec![(k.clone(), None)]);
    let a = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
    let foreign = DeviceBuffer::<f32>::zeroed(&other, 4).unwrap();
    let args = vadd_args(&k, &a, &foreign, &a);
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, LaunchConfig::linear(1, 64), &args)
    }
    .unwrap_err();
    let msg = err.to_string();
    match err {
        Error::WrongDevice {
            argument,
            buffer_device,
            stream_device,
            ..
        } => {
            assert_eq!(argument, "b", "the foreign buffer is the second parameter");
            assert_eq!(buffer_device, other.label());
            assert_eq!(stream_device, dev.label());
        }
        e => panic!("expected WrongDevice, got {e}"),
    }
    // The message names the argument and both devices by backend, ordinal, name and id.
    for part in [
        "argument `b`".to_string(),
        other.label().to_string(),
        dev.label().to_string(),
        format!("Sim device 0 `{}`", dev.name()),
    ] {
        assert!(msg.contains(&part), "`{part}` missing from: {msg}");
    }
}

#[test]
fn unwritten_and_mistyped_arguments_are_rejected() {
    let dev = Device::new_sim(Target::Gfx942);
    let k = vadd(Target::Gfx942, 256);
    let table = table("demo", vec![(k, None)]);
    let a = DeviceBuffer::<f32>::zeroed(&dev, 4).unwrap();
    let s = dev.stream().unwrap();
    let mut args = KernelArgs::new(48);
    args.tensor(0, &a);
    args.tensor(16, &a);
    // SAFETY: rejected before launching.
    let err = unsafe { s.launch(table, LaunchConfig::linear(1, 64), &args) }.unwrap_err();
    assert!(
        err.to_string()
            .contains("argument `c` at offset 32 was never written"),
        "{err}"
    );
    args.scalar(32, 5u64);
    args.scalar(40, 5i64);
    // SAFETY: rejected before launching.
    let err = unsafe { s.launch(table, LaunchConfig::linear(1, 64), &args) }.unwrap_err();
    assert!(
        err.to_string()
            .contains("argument `c` at offset 32 is a 8-byte pointer"),
        "{err}"
    );
}

#[test]
fn events_time_sim_launches() {
    let dev = Device::new_sim(Target::Gfx942);
    let s = dev.stream().unwrap();
    let start = s.record_event().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let end = s.record_event().unwrap();
    end.synchronize().unwrap();
    let ms = Event::elapsed_ms(&start, &end).unwrap();
    assert!(ms >= 4.0, "{ms}");
    let other = Device::new_sim(Target::Gfx942);
    let foreign = other.event().unwrap();
    match foreign.record(&s) {
        Err(Error::DeviceMismatch { what, a, b }) => {
            assert!(what.starts_with("Event::record"), "{what}");
            assert_eq!((a, b), (other.label(), dev.label()));
        }
        r => panic!("expected DeviceMismatch, got {r:?}"),
    }
    match Event::elapsed_ms(&start, &foreign) {
        Err(e @ Error::DeviceMismatch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&dev.id().to_string()), "{msg}");
            assert!(msg.contains(&other.id().to_string()), "{msg}");
        }
        r => panic!("expected DeviceMismatch, got {r:?}"),
    }
}

#[test]
fn device_properties() {
    let d = Device::new_sim(Target::Sm90);
    assert_eq!(d.name(), "flydsl Sim (sm90, wave32)");
    assert_eq!(d.target(), Target::Sm90);
    assert_eq!(d.wave_size(), 32);
    // The H200's opt-in limit (static shared memory alone stays at 48 KiB).
    assert_eq!(d.max_lds_bytes(), 232448);
    assert_eq!(d.compute_units(), 132);
    assert_eq!(d.backend(), Backend::Sim);
    assert_eq!(Device::sim(Target::Gfx942), Device::sim(Target::Gfx942));
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Device>();
    send_sync::<Stream>();
    send_sync::<Event>();
    send_sync::<DeviceBuffer<f32>>();
    send_sync::<KernelArgs>();
}

#[test]
fn dynamic_lds_bytes_for_a_kernel_without_a_region_are_rejected() {
    let dev = Device::new_sim(Target::Gfx1201);
    let table = table("demo", vec![(noop(Target::Gfx1201), None)]);
    let cfg = LaunchConfig::linear(1, 32).with_dynamic_lds(1024);
    // SAFETY: rejected before launching.
    let err = unsafe {
        dev.stream()
            .unwrap()
            .launch(table, cfg, &KernelArgs::new(0))
    }
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("dynamic_lds_bytes is 1024") && err.contains("no dynamic LDS region"),
        "{err}"
    );
}
