//! The Hopper miscellany proof kernel ([`flydsl_devtools::proof::hopper_misc`]):
//! `setmaxnreg` dec/inc, `elect.sync` counting warps with one atomic per warp, and an
//! `stmatrix.x4` / `ldmatrix.x4.trans` round trip through LDS.
//!
//! - Sim (always): the result equals an independent CPU model built from the `NvOp::LdMatrix`
//!   fragment layout (memcheck, racecheck and initcheck on, as `Device::new_sim` sets them).
//! - CUDA (when an sm_90 GPU is present): the same model, the Sim's exact output, and the
//!   driver-reported registers within the kernel's 128-register cap without spills. Without
//!   a GPU the CUDA half prints why it skipped (and fails with `FLYDSL_REQUIRE_GPU` set).
//! - PTX structure (when built with `--features sm90`): the instructions are there.

use flydsl_devtools::inspect::count_ptx_instructions;
use flydsl_devtools::proof::{HOPPER_MISC_BLOCK, HOPPER_MISC_DEC_REGS, HOPPER_MISC_REGS};
use flydsl_ir::Target;
use flydsl_rt::{Backend, Device, DeviceBuffer, LaunchConfig};
use flydsl_tests::proof;
use flydsl_testutil::rng::Rng;

const BLOCKS: u32 = 3;

/// 16-bit half `h` (0 low, 1 high) of a packed register.
fn half(v: i32, h: usize) -> u32 {
    ((v as u32) >> (16 * h)) & 0xffff
}

/// The CPU model of the kernel's `out`: per warp and matrix `i`, `stmatrix` (non-trans)
/// reads `M_i[r][c]` from half `c % 2` of register `i` of lane `4r + c / 2`, and
/// `ldmatrix.trans` gives lane `l` register `i` = `M_i[2 (l % 4)][l / 4]` (low) and
/// `M_i[2 (l % 4) + 1][l / 4]` (high).
fn model(src: &[i32]) -> Vec<i32> {
    let threads = src.len() / 4;
    let mut out = vec![0i32; src.len()];
    for w in 0..threads / 32 {
        for i in 0..4 {
            let m = |r: usize, c: usize| half(src[(w * 32 + 4 * r + c / 2) * 4 + i], c % 2);
            for l in 0..32 {
                let lo = m(2 * (l % 4), l / 4);
                let hi = m(2 * (l % 4) + 1, l / 4);
                out[(w * 32 + l) * 4 + i] = (lo | (hi << 16)) as i32;
            }
        }
    }
    out
}

/// Run the kernel on `dev` with `src`; returns (`out`, `count[0]`).
fn run(dev: &Device, src: &[i32]) -> (Vec<i32>, i32) {
    let s = dev.stream().unwrap();
    let d_src = DeviceBuffer::from_slice(dev, src).unwrap();
    let mut d_out = DeviceBuffer::<i32>::zeroed(dev, src.len()).unwrap();
    let mut d_count = DeviceBuffer::<i32>::zeroed(dev, 1).unwrap();
    let cfg = LaunchConfig::linear(BLOCKS, HOPPER_MISC_BLOCK);
    // SAFETY: `src` and `out` hold 4 i32 per launched thread, `count` one i32.
    unsafe { proof::hopper_misc(&s, cfg, &d_src, &mut d_out, &mut d_count) }.unwrap();
    (d_out.to_vec().unwrap(), d_count.to_vec().unwrap()[0])
}

fn input(seed: u64) -> Vec<i32> {
    let mut rng = Rng::new(seed);
    (0..(BLOCKS * HOPPER_MISC_BLOCK * 4) as usize)
        .map(|_| rng.next_u64() as i32)
        .collect()
}

/// Panic naming the first differing word (the vectors are long).
fn same(got: &[i32], want: &[i32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: word {i} (thread {}, register {}) is {:#010x}, expected {:#010x}",
            i / 4,
            i % 4,
            got[i],
            want[i]
        );
    }
}

fn warps() -> i32 {
    (BLOCKS * HOPPER_MISC_BLOCK / 32) as i32
}

#[test]
fn model_is_a_transpose_round_trip() {
    // The model itself: applying it to a matrix that is symmetric in every warp's 8 x 8
    // matrices leaves each lane's packed pair unchanged (the fragment of M^T is M's).
    let mut src = vec![0i32; 4 * 32];
    for i in 0..4 {
        for l in 0..32 {
            let v = |r: usize, c: usize| ((r.min(c) * 8 + r.max(c)) * 4 + i) as u32;
            let (r, c) = (l / 4, 2 * (l % 4));
            src[l * 4 + i] = (v(r, c) | (v(r, c + 1) << 16)) as i32;
        }
    }
    assert_eq!(model(&src), src);
    // And a non-symmetric input changes.
    let x = input(3)[..4 * 32].to_vec();
    assert_ne!(model(&x), x);
}

#[test]
fn sim_matches_the_cpu_model() {
    let sim = Device::new_sim(Target::Sm90);
    for seed in [1, 2] {
        let src = input(seed);
        let (out, count) = run(&sim, &src);
        assert_eq!(count, warps(), "elect.sync: one atomic add per warp");
        same(&out, &model(&src), "stmatrix / ldmatrix.trans round trip");
    }
}

#[test]
fn cuda_matches_the_model_and_the_sim() {
    let devs = match Device::enumerate(Backend::Cuda) {
        Ok(d) => d,
        Err(e) => {
            flydsl_testutil::gpu::skip(&format!("CUDA unavailable: {e}"));
            return;
        }
    };
    let Some(dev) = devs.into_iter().find(|d| d.target() == Target::Sm90) else {
        flydsl_testutil::gpu::skip("no sm_90 CUDA device");
        return;
    };
    if proof::HOPPER_MISC
        .for_target(Target::Sm90)
        .and_then(|v| v.code)
        .is_none()
    {
        flydsl_testutil::gpu::skip("no sm90 code object: build with --features sm90");
        return;
    }
    let sim = Device::new_sim(Target::Sm90);
    for seed in [1, 2, 3] {
        let src = input(seed);
        let (out, count) = run(&dev, &src);
        assert_eq!(count, warps(), "{}: elect.sync count", dev.name());
        same(
            &out,
            &model(&src),
            &format!("{}: round trip vs model", dev.name()),
        );
        let (sim_out, sim_count) = run(&sim, &src);
        assert_eq!(count, sim_count, "{}: count vs the Sim", dev.name());
        same(&out, &sim_out, &format!("{}: vs the Sim", dev.name()));
    }
    let r = dev
        .kernel_resources(&proof::HOPPER_MISC)
        .unwrap()
        .expect("the CUDA backend reports resources");
    println!(
        "hopper_misc: regs {} private {} B (cap {HOPPER_MISC_REGS})",
        r.registers, r.private_bytes
    );
    assert!(r.registers <= HOPPER_MISC_REGS, "{} registers", r.registers);
    assert_eq!(r.private_bytes, 0, "spills");
}

#[test]
fn ptx_has_the_hopper_instructions() {
    let Some(code) = proof::HOPPER_MISC
        .for_target(Target::Sm90)
        .and_then(|v| v.code)
    else {
        println!("skipped: no sm90 code object (build with --features sm90)");
        return;
    };
    let ptx = std::str::from_utf8(code).unwrap();
    for (what, n) in [
        ("setmaxnreg.dec.sync.aligned.u32", 1),
        ("setmaxnreg.inc.sync.aligned.u32", 1),
        ("elect.sync", 1),
        ("stmatrix.sync.aligned.m8n8.x4.shared.b16", 1),
        ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", 1),
    ] {
        assert_eq!(count_ptx_instructions(ptx, what), n, "{what} in\n{ptx}");
    }
    assert!(ptx.contains(&format!(
        "setmaxnreg.dec.sync.aligned.u32 {HOPPER_MISC_DEC_REGS}"
    )));
    assert!(ptx.contains(&format!(
        "setmaxnreg.inc.sync.aligned.u32 {HOPPER_MISC_REGS}"
    )));
    assert!(
        ptx.contains(&format!(".maxnreg {HOPPER_MISC_REGS}")),
        "{ptx}"
    );
}
