//! Host-side and Sim timings (criterion): the launch path's validation + packing (a launch
//! with an empty grid stops right after validating), and a Sim execution of a vector add.
//! GPU kernel timings live in `cargo xtask bench` (events, L2 flush, medians).

use criterion::{criterion_group, criterion_main, Criterion};
use flydsl_rt::{Device, DeviceBuffer, KernelArgs, KernelVariant, KernelVariants, LaunchConfig};
use flydsl_rt::{ScalarType, Target};

fn vadd_table(t: Target) -> &'static KernelVariants {
    let k = flydsl_devtools::proof::vadd(t, ScalarType::F32).expect("proof kernel builds");
    let ir: &'static [u8] = Box::leak(flydsl_ir::to_bytes(&k).into_boxed_slice());
    let variants: &'static [KernelVariant] = Box::leak(Box::new([KernelVariant {
        target: t,
        code: None,
        ir,
    }]));
    Box::leak(Box::new(KernelVariants {
        name: "vadd_f32",
        crate_name: "bench",
        variants,
    }))
}

fn bench(c: &mut Criterion) {
    let t = Target::Gfx942;
    let table = vadd_table(t);
    let dev = Device::new_sim(t);
    let s = dev.stream().unwrap();
    let n = 1 << 16;
    let a = DeviceBuffer::from_slice(&dev, &vec![1.0f32; n]).unwrap();
    let b = DeviceBuffer::from_slice(&dev, &vec![2.0f32; n]).unwrap();
    let out = DeviceBuffer::<f32>::zeroed(&dev, n).unwrap();
    let pack = |args: &mut KernelArgs| {
        args.tensor(0, &a);
        args.tensor(16, &b);
        args.tensor(32, &out);
        args.scalar(48, n as i32);
    };
    c.bench_function("validate+pack (empty grid)", |bch| {
        bch.iter(|| {
            let mut args = KernelArgs::new(56);
            pack(&mut args);
            // SAFETY: an empty grid launches nothing.
            unsafe {
                s.launch(
                    table,
                    LaunchConfig {
                        grid: [0, 1, 1],
                        block: [256, 1, 1],
                        dynamic_lds_bytes: 0,
                    },
                    &args,
                )
            }
            .unwrap();
        })
    });
    c.bench_function("sim vadd 65536 f32 (gfx942)", |bch| {
        bch.iter(|| {
            let mut args = KernelArgs::new(56);
            pack(&mut args);
            // SAFETY: the kernel guards i < n and every buffer holds n elements.
            unsafe { s.launch(table, LaunchConfig::linear((n / 256) as u32, 256), &args) }.unwrap();
        })
    });
}

criterion_group! {
    name = host;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(host);
