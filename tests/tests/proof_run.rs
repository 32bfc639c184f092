//! The generator's proof kernels run on every backend present and match CPU references:
//! Sim for all five targets (wave64 and wave32, each target's matrix atom), CUDA when an
//! NVIDIA GPU is present (sm_90 code objects), HIP when one is present.
//!
//! On a GPU, the raw matrix-atom probes (the native 16-bit atom; on sm_90 also the 8-bit
//! m16n8k32 e4m3 / e5m2 / s8 atoms) also check that the Sim's lane layout of the atom agrees
//! with the hardware on the same one-hot inputs. With `FLYDSL_REQUIRE_GPU` set, finding
//! no GPU at all is a failure rather than a skip.

use flydsl_dsl::atoms::host;
use flydsl_ir::{MmaAtom, Target};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Backend, Device, DeviceBuffer, LaunchConfig};
use flydsl_tests::proof;
use flydsl_testutil::rng::Rng;

/// Every device to test: a Sim device per target, plus the real GPUs that are present.
fn devices() -> Vec<Device> {
    // The test-only fake libamdhip64 (found on the loader path cargo sets for tests) runs
    // kernels through the Sim and needs their IR; a real HIP library ignores this.
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        std::env::set_var("FLYDSL_FAKE_HIP_IR_DIR", flydsl_tests::IR_DIR);
        // Use the fake on purpose when cargo built it next to this test binary.
        if std::env::var_os("FLYDSL_HIP_LIB").is_none() {
            let exe = std::env::current_exe().expect("test binary path");
            let dir = exe.parent().expect("test binary folder");
            let found = [dir.join("libamdhip64.so"), dir.join("../libamdhip64.so")]
                .into_iter()
                .find(|p| p.is_file());
            if let Some(p) = found {
                std::env::set_var("FLYDSL_HIP_LIB", p);
            }
        }
    });
    let mut v: Vec<Device> = Target::ALL.into_iter().map(Device::new_sim).collect();
    for backend in [Backend::Cuda, Backend::Hip] {
        match Device::enumerate(backend) {
            Ok(ds) if !ds.is_empty() => v.extend(ds),
            Ok(_) => println!("skipped {backend}: no device"),
            Err(e) => println!("skipped {backend}: {e}"),
        }
    }
    // One missing backend is normal (an NVIDIA machine has no HIP); none at all fails where
    // FLYDSL_REQUIRE_GPU is set, so a GPU run cannot pass on the Sim devices alone.
    if flydsl_testutil::gpu::required() && v.iter().all(|d| d.backend() == Backend::Sim) {
        flydsl_testutil::gpu::skip("no CUDA or HIP device present");
    }
    v
}

fn gpus() -> Vec<Device> {
    devices()
        .into_iter()
        .filter(|d| d.backend() != Backend::Sim)
        .collect()
}

#[test]
fn vadd_matches_cpu_on_every_device() {
    let mut rng = Rng::new(1);
    for dev in devices() {
        let s = dev.stream().unwrap();
        for n in [1usize, 255, 256, 1000, 4097] {
            let a = rng.randn(n);
            let b = rng.randn(n);
            let da = DeviceBuffer::from_slice(&dev, &a).unwrap();
            let db = DeviceBuffer::from_slice(&dev, &b).unwrap();
            let mut dc = DeviceBuffer::<f32>::zeroed(&dev, n).unwrap();
            let cfg = LaunchConfig::linear((n as u32).div_ceil(proof_block()), proof_block());
            // SAFETY: the kernel guards i < n and all buffers hold n elements.
            unsafe { proof::vadd_f32(&s, cfg, &da, &db, &mut dc, n as i32) }.unwrap();
            let c = dc.to_vec().unwrap();
            for i in 0..n {
                assert_eq!(c[i], a[i] + b[i], "{} n={n} i={i}", dev.name());
            }
            // f16: the sum rounds once from the exact sum of two halves.
            let ah: Vec<f16> = a.iter().map(|&x| f16::from_f32(x)).collect();
            let bh: Vec<f16> = b.iter().map(|&x| f16::from_f32(x)).collect();
            let da = DeviceBuffer::from_slice(&dev, &ah).unwrap();
            let db = DeviceBuffer::from_slice(&dev, &bh).unwrap();
            let mut dc = DeviceBuffer::<f16>::zeroed(&dev, n).unwrap();
            // SAFETY: as above.
            unsafe { proof::vadd_f16(&s, cfg, &da, &db, &mut dc, n as i32) }.unwrap();
            let c = dc.to_vec().unwrap();
            for i in 0..n {
                let want = f16::from_f32(ah[i].to_f32() + bh[i].to_f32());
                assert_eq!(c[i], want, "{} f16 n={n} i={i}", dev.name());
            }
        }
    }
}

fn proof_block() -> u32 {
    flydsl_devtools::proof::VADD_BLOCK
}

#[test]
fn block_sum_matches_cpu_on_every_device() {
    let mut rng = Rng::new(2);
    for dev in devices() {
        let s = dev.stream().unwrap();
        for (rows, n) in [(1usize, 1usize), (3, 1000), (2, 4099)] {
            let x = rng.randn(rows * n);
            let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
            let mut out = DeviceBuffer::<f32>::zeroed(&dev, rows).unwrap();
            let cfg = LaunchConfig::linear(rows as u32, flydsl_devtools::proof::SUM_BLOCK);
            // SAFETY: every block reads its own row of n elements.
            unsafe { proof::block_sum_f32(&s, cfg, &dx, &mut out, n as i32) }.unwrap();
            let got = out.to_vec().unwrap();
            for r in 0..rows {
                let want: f64 = x[r * n..(r + 1) * n].iter().map(|&v| v as f64).sum();
                let err = (got[r] as f64 - want).abs();
                assert!(
                    err <= 1e-4 * (n as f64).sqrt(),
                    "{} row {r}: {} vs {want}",
                    dev.name(),
                    got[r]
                );
            }
        }
    }
}

/// Dynamic LDS bytes of `segment_reverse_f32` for segments of `n`.
fn reverse_lds_bytes(n: usize) -> u32 {
    use flydsl_ir::ScalarType::{F32, I32};
    let (offsets, bytes) =
        flydsl_ir::dynamic_lds_layout(&[(F32, n as u64), (I32, n as u64)]).unwrap();
    assert_eq!(offsets[1], (4 * n as u64).next_multiple_of(16));
    bytes as u32
}

#[test]
fn dynamic_lds_segment_reverse_on_every_device() {
    let mut rng = Rng::new(3);
    for dev in devices() {
        let s = dev.stream().unwrap();
        // 12000 f32 + 12000 i32 = 96000 B: past sm_90's 48 KiB static limit (the runtime opts
        // in) and past gfx942/gfx1201's 64 KiB (refused before launching).
        for (segs, n) in [(1usize, 1usize), (3, 1001), (2, 257), (2, 12000)] {
            let x = rng.randn(segs * n);
            let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
            let mut dy = DeviceBuffer::<f32>::zeroed(&dev, segs * n).unwrap();
            let bytes = reverse_lds_bytes(n);
            let cfg = LaunchConfig::linear(segs as u32, flydsl_devtools::proof::REVERSE_BLOCK)
                .with_dynamic_lds(bytes);
            // SAFETY: each block touches its own segment of n elements and n elements of each
            // dynamic array, which `bytes` covers.
            let r = unsafe { proof::segment_reverse_f32(&s, cfg, &dx, &mut dy, n as i32) };
            let total = u64::from(bytes); // the kernel has no static LDS
            if total > dev.max_lds_bytes() {
                let err = r.unwrap_err();
                assert!(
                    matches!(err, flydsl_rt::Error::LdsTooLarge { bytes: b, .. } if b == total),
                    "{}: {err}",
                    dev.name()
                );
                continue;
            }
            r.unwrap();
            let y = dy.to_vec().unwrap();
            for sg in 0..segs {
                for i in 0..n {
                    assert_eq!(
                        y[sg * n + i],
                        x[sg * n + n - 1 - i],
                        "{} n={n} seg {sg} i={i}",
                        dev.name()
                    );
                }
            }
        }
    }
}

#[test]
fn dynamic_lds_too_small_is_an_out_of_bounds_error_in_sim() {
    let n = 300usize;
    let x = vec![1.0f32; n];
    for t in Target::ALL {
        let dev = Device::new_sim(t);
        let s = dev.stream().unwrap();
        let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
        let mut dy = DeviceBuffer::<f32>::zeroed(&dev, n).unwrap();
        // One byte short: the last permutation entry lies past the region.
        let cfg = LaunchConfig::linear(1, flydsl_devtools::proof::REVERSE_BLOCK)
            .with_dynamic_lds(reverse_lds_bytes(n) - 1);
        // SAFETY: the Sim checks every access; the launch fails instead of touching memory.
        let err = unsafe { proof::segment_reverse_f32(&s, cfg, &dx, &mut dy, n as i32) }
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("segment (dynamic region of") && err.contains("LDS out-of-bounds"),
            "{t}: {err}"
        );
    }
}

/// The 16-bit input types of the matrix-atom kernels, with their launchers.
trait Half: flydsl_rt::DeviceRepr + Copy {
    const BF: bool;
    fn of(v: f32) -> Self;
    /// # Safety: as the generated launcher.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tiled(
        s: &flydsl_rt::Stream,
        cfg: LaunchConfig,
        a: &DeviceBuffer<Self>,
        b: &DeviceBuffer<Self>,
        c: &mut DeviceBuffer<f32>,
        m: i32,
        n: i32,
        k: i32,
    ) -> flydsl_rt::Result<()>;
    /// # Safety: as the generated launcher.
    unsafe fn probe(
        s: &flydsl_rt::Stream,
        cfg: LaunchConfig,
        a: &DeviceBuffer<Self>,
        b: &DeviceBuffer<Self>,
        c: &DeviceBuffer<f32>,
        d: &mut DeviceBuffer<f32>,
    ) -> flydsl_rt::Result<()>;
}
/// Implements [`Half`] for one type with its generated launchers.
macro_rules! half_impl {
    ($t:ty, $bf:expr, $tiled:ident, $probe:ident) => {
        impl Half for $t {
            const BF: bool = $bf;
            fn of(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            unsafe fn tiled(
                s: &flydsl_rt::Stream,
                cfg: LaunchConfig,
                a: &DeviceBuffer<Self>,
                b: &DeviceBuffer<Self>,
                c: &mut DeviceBuffer<f32>,
                m: i32,
                n: i32,
                k: i32,
            ) -> flydsl_rt::Result<()> {
                // SAFETY: forwarded.
                unsafe { proof::$tiled(s, cfg, a, b, c, m, n, k) }
            }
            unsafe fn probe(
                s: &flydsl_rt::Stream,
                cfg: LaunchConfig,
                a: &DeviceBuffer<Self>,
                b: &DeviceBuffer<Self>,
                c: &DeviceBuffer<f32>,
                d: &mut DeviceBuffer<f32>,
            ) -> flydsl_rt::Result<()> {
                // SAFETY: forwarded.
                unsafe { proof::$probe(s, cfg, a, b, c, d) }
            }
        }
    };
}
half_impl!(f16, false, tiled_mma_f16, mma_probe_f16);
half_impl!(bf16, true, tiled_mma_bf16, mma_probe_bf16);

/// C = A * B^T on small integers (exact in f32) through the pipelined tile-layer GEMM, at
/// any M, N and K (a multiple of 8): ragged edges are zero-filled and their stores dropped.
fn tiled_mma_case<T: Half>(dev: &Device, (m, n, k): (usize, usize, usize), rng: &mut Rng) {
    flydsl_devtools::proof::tiled_mma_check(dev.target(), m, n, k).unwrap();
    let ints = |rng: &mut Rng, len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| (rng.next_u64() % 9) as f32 - 4.0)
            .collect()
    };
    let a = ints(rng, m * k);
    let b = ints(rng, n * k);
    let da =
        DeviceBuffer::from_slice(dev, &a.iter().map(|&v| T::of(v)).collect::<Vec<_>>()).unwrap();
    let db =
        DeviceBuffer::from_slice(dev, &b.iter().map(|&v| T::of(v)).collect::<Vec<_>>()).unwrap();
    // A sentinel everywhere: every element must be written, none outside C (memcheck).
    let mut dc = DeviceBuffer::from_slice(dev, &vec![f32::NAN; m * n]).unwrap();
    let (grid, block) = flydsl_devtools::proof::tiled_mma_launch(dev.target(), m, n);
    let cfg = LaunchConfig {
        grid,
        block,
        dynamic_lds_bytes: 0,
    };
    let s = dev.stream().unwrap();
    // SAFETY: a holds m*k, b n*k, c m*n elements; the kernel guards every access by m, n, k.
    unsafe { T::tiled(&s, cfg, &da, &db, &mut dc, m as i32, n as i32, k as i32) }.unwrap();
    let c = dc.to_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|kk| a[i * k + kk] * b[j * k + kk]).sum();
            assert_eq!(
                c[i * n + j],
                want,
                "{} C[{i}][{j}] (m={m} n={n} k={k})",
                dev.name()
            );
        }
    }
}

#[test]
fn tiled_mma_is_exact_on_every_device() {
    let mut rng = Rng::new(3);
    for dev in devices() {
        // One block and one K tile; ragged in every dimension; several blocks and K tiles.
        for shape in [(16, 16, 32), (100, 72, 136), (200, 136, 264)] {
            tiled_mma_case::<f16>(&dev, shape, &mut rng);
            tiled_mma_case::<bf16>(&dev, shape, &mut rng);
        }
    }
}

/// Run the raw atom probe once; returns D fragments in (lane, v) order.
fn probe<T: Half>(dev: &Device, a: &[f32], b: &[f32]) -> Vec<f32> {
    let atom = MmaAtom::native_16bit(dev.target(), T::BF);
    let (_, _, nc) = atom.frag_lanes(dev.wave_size());
    let w = dev.wave_size() as usize;
    let da =
        DeviceBuffer::from_slice(dev, &a.iter().map(|&v| T::of(v)).collect::<Vec<_>>()).unwrap();
    let db =
        DeviceBuffer::from_slice(dev, &b.iter().map(|&v| T::of(v)).collect::<Vec<_>>()).unwrap();
    let dc = DeviceBuffer::<f32>::zeroed(dev, w * nc as usize).unwrap();
    let mut dd = DeviceBuffer::<f32>::zeroed(dev, w * nc as usize).unwrap();
    let s = dev.stream().unwrap();
    // SAFETY: every buffer holds wave x fragment-length elements.
    unsafe {
        T::probe(
            &s,
            LaunchConfig::linear(1, dev.wave_size()),
            &da,
            &db,
            &dc,
            &mut dd,
        )
    }
    .unwrap();
    dd.to_vec().unwrap()
}

/// One-hot probes of every A slot (matrix-layouts.md §9.1): with B[k][j] = k + 1 (placed by
/// the documented B map), D must hold k+1 in exactly the row of the documented A map. Run on
/// every device: on the Sim it ties the Sim's atom to the generator's layout table; on a GPU
/// it ties both to the hardware.
fn one_hot_a<T: Half>(dev: &Device) {
    let t = dev.target();
    let atom = MmaAtom::native_16bit(t, T::BF);
    let w = dev.wave_size();
    let (na, nb, nc) = atom.frag_lanes(w);
    let (_, n, _) = atom.shape();
    let mut b = vec![0f32; (w * nb) as usize];
    for l in 0..w {
        for e in 0..nb {
            let (k, _) = host::b(atom, l, e);
            b[(l * nb + e) as usize] = (k + 1) as f32;
        }
    }
    for l in 0..w {
        for e in 0..na {
            let mut a = vec![0f32; (w * na) as usize];
            a[(l * na + e) as usize] = 1.0;
            let d = probe::<T>(dev, &a, &b);
            let (i, k) = host::a(atom, l, e);
            let mut hits = 0;
            for dl in 0..w {
                for v in 0..nc {
                    let val = d[(dl * nc + v) as usize];
                    let (ri, _) = host::c(atom, dl, v);
                    if val != 0.0 {
                        assert_eq!(
                            (ri, val),
                            (i, (k + 1) as f32),
                            "{} {atom:?} A probe lane {l} elem {e}",
                            dev.name()
                        );
                        hits += 1;
                    }
                }
            }
            assert_eq!(
                hits,
                n,
                "{} {atom:?} A probe lane {l} elem {e}: {hits} non-zeros",
                dev.name()
            );
        }
    }
}

#[test]
fn atom_one_hot_probes_on_every_device() {
    for dev in devices() {
        one_hot_a::<f16>(&dev);
        one_hot_a::<bf16>(&dev);
    }
}

/// On a GPU: the Sim of the same target computes bit-identical D fragments for random
/// small-integer inputs (exact products and sums), lane by lane.
#[test]
fn sim_atom_agrees_with_hardware() {
    let gpus = gpus();
    if gpus.is_empty() {
        flydsl_testutil::gpu::skip(
            "no GPU present (the Sim side is covered by atom_one_hot_probes_on_every_device)",
        );
        return;
    }
    let mut rng = Rng::new(4);
    for dev in gpus {
        let sim = Device::new_sim(dev.target());
        let atom = MmaAtom::native_16bit(dev.target(), true);
        let (na, nb, _) = atom.frag_lanes(dev.wave_size());
        let w = dev.wave_size();
        for _ in 0..8 {
            let a: Vec<f32> = (0..w * na)
                .map(|_| (rng.next_u64() % 7) as f32 - 3.0)
                .collect();
            let b: Vec<f32> = (0..w * nb)
                .map(|_| (rng.next_u64() % 7) as f32 - 3.0)
                .collect();
            assert_eq!(
                probe::<bf16>(&dev, &a, &b),
                probe::<bf16>(&sim, &a, &b),
                "{}",
                dev.name()
            );
            assert_eq!(
                probe::<f16>(&dev, &a, &b),
                probe::<f16>(&sim, &a, &b),
                "{}",
                dev.name()
            );
        }
    }
}

// ---- sm_90 8-bit mma.sync atoms (m16n8k32 e4m3 / e5m2 / s8) ----

/// Encode the small integer `x` exactly in an 8-bit input type.
fn fp8_bits(t: flydsl_ir::ScalarType, x: i32) -> u8 {
    use flydsl_sim::fp8::{decode, encode, Fp8Format};
    let f = Fp8Format::of(t).expect("an fp8 type");
    let b = encode(f, x as f32);
    assert_eq!(decode(f, b), x as f32, "{x} is not exact in {t}");
    b
}

/// Run the raw probe of the sm_90 8-bit `atom` once on `dev` with small-integer A and B in
/// fragment order (lane-major) and C = 0; returns D fragments in (lane, v) order as integers
/// (an f32 D must be integral).
fn probe8(dev: &Device, atom: MmaAtom, a: &[i32], b: &[i32]) -> Vec<i64> {
    use flydsl_rt::{F8E4M3FN, F8E5M2};
    let (_, _, nc) = atom.frag_lanes(dev.wave_size());
    let n = dev.wave_size() as usize * nc as usize;
    let s = dev.stream().unwrap();
    let cfg = LaunchConfig::linear(1, dev.wave_size());
    let t = atom.in_type(dev.target());
    let up = |v: &[i32]| -> Vec<u8> { v.iter().map(|&x| fp8_bits(t, x)).collect() };
    let floats = |d: Vec<f32>| -> Vec<i64> {
        d.into_iter()
            .map(|x| {
                assert_eq!(x.fract(), 0.0, "{} {atom:?}: D {x}", dev.name());
                x as i64
            })
            .collect()
    };
    let dc = DeviceBuffer::<f32>::zeroed(dev, n).unwrap();
    let mut dd = DeviceBuffer::<f32>::zeroed(dev, n).unwrap();
    // SAFETY (all three launches): every buffer holds wave x fragment-length elements.
    match atom {
        MmaAtom::MmaM16N8K32E4M3 => {
            let to = |v: &[i32]| up(v).into_iter().map(F8E4M3FN).collect::<Vec<_>>();
            let da = DeviceBuffer::from_slice(dev, &to(a)).unwrap();
            let db = DeviceBuffer::from_slice(dev, &to(b)).unwrap();
            unsafe { proof::mma_probe_e4m3(&s, cfg, &da, &db, &dc, &mut dd) }.unwrap();
            floats(dd.to_vec().unwrap())
        }
        MmaAtom::MmaM16N8K32E5M2 => {
            let to = |v: &[i32]| up(v).into_iter().map(F8E5M2).collect::<Vec<_>>();
            let da = DeviceBuffer::from_slice(dev, &to(a)).unwrap();
            let db = DeviceBuffer::from_slice(dev, &to(b)).unwrap();
            unsafe { proof::mma_probe_e5m2(&s, cfg, &da, &db, &dc, &mut dd) }.unwrap();
            floats(dd.to_vec().unwrap())
        }
        MmaAtom::MmaM16N8K32S8 => {
            let to = |v: &[i32]| v.iter().map(|&x| x as i8).collect::<Vec<_>>();
            let da = DeviceBuffer::from_slice(dev, &to(a)).unwrap();
            let db = DeviceBuffer::from_slice(dev, &to(b)).unwrap();
            let dc = DeviceBuffer::<i32>::zeroed(dev, n).unwrap();
            let mut dd = DeviceBuffer::<i32>::zeroed(dev, n).unwrap();
            unsafe { proof::mma_probe_s8(&s, cfg, &da, &db, &dc, &mut dd) }.unwrap();
            dd.to_vec().unwrap().into_iter().map(i64::from).collect()
        }
        other => panic!("{other:?} has no sm_90 8-bit probe"),
    }
}

/// A positive value, exact in the atom's input type, that identifies K index `k` from two
/// neighbouring rows/columns `x`: `k + 1` for s8; for fp8 (exact integers only up to 16 in
/// E4M3, 8 in E5M2) `k % r + 1` for even `x` and `k / r + 1` for odd `x`.
fn k_code(atom: MmaAtom, k: u32, x: u32) -> i32 {
    let r = match atom {
        MmaAtom::MmaM16N8K32E4M3 => 16,
        MmaAtom::MmaM16N8K32E5M2 => 8,
        _ => return k as i32 + 1,
    };
    (if x % 2 == 1 { k / r } else { k % r }) as i32 + 1
}

/// One-hot probes of every A and every B slot of an sm_90 8-bit atom (matrix-layouts.md §9.1)
/// against the generator's layout table ([`host`]): a one-hot A slot (i, k) must give
/// `D[i][j] = B[k][j]` in row i only; a one-hot B slot (k, j) `D[i][j] = A[i][k]` in column
/// j only.
fn one_hot_8bit(dev: &Device, atom: MmaAtom) {
    let w = dev.wave_size();
    let (na, nb, nc) = atom.frag_lanes(w);
    let (m, n, _) = atom.shape();
    let d_at = |d: &[i64], i: u32, j: u32| -> i64 {
        let slot = (0..w)
            .flat_map(|l| (0..nc).map(move |v| (l, v)))
            .find(|&(l, v)| host::c(atom, l, v) == (i, j))
            .expect("every D element has a slot");
        d[(slot.0 * nc + slot.1) as usize]
    };
    let frag = |len: u32, f: &dyn Fn(u32, u32) -> i32| -> Vec<i32> {
        (0..w * len).map(|x| f(x / len, x % len)).collect()
    };
    // A probes.
    let b = frag(nb, &|l, e| {
        let (k, j) = host::b(atom, l, e);
        k_code(atom, k, j)
    });
    for l in 0..w {
        for e in 0..na {
            let mut a = vec![0; (w * na) as usize];
            a[(l * na + e) as usize] = 1;
            let d = probe8(dev, atom, &a, &b);
            let (i, k) = host::a(atom, l, e);
            for ii in 0..m {
                for j in 0..n {
                    let want = if ii == i {
                        k_code(atom, k, j) as i64
                    } else {
                        0
                    };
                    assert_eq!(
                        d_at(&d, ii, j),
                        want,
                        "{} {atom:?} A probe lane {l} elem {e} (A[{i}][{k}]): D[{ii}][{j}]",
                        dev.name()
                    );
                }
            }
        }
    }
    // B probes.
    let a = frag(na, &|l, e| {
        let (i, k) = host::a(atom, l, e);
        k_code(atom, k, i)
    });
    for l in 0..w {
        for e in 0..nb {
            let mut b = vec![0; (w * nb) as usize];
            b[(l * nb + e) as usize] = 1;
            let d = probe8(dev, atom, &a, &b);
            let (k, j) = host::b(atom, l, e);
            for i in 0..m {
                for jj in 0..n {
                    let want = if jj == j {
                        k_code(atom, k, i) as i64
                    } else {
                        0
                    };
                    assert_eq!(
                        d_at(&d, i, jj),
                        want,
                        "{} {atom:?} B probe lane {l} elem {e} (B[{k}][{j}]): D[{i}][{jj}]",
                        dev.name()
                    );
                }
            }
        }
    }
}

/// On the sm_90 Sim and on every NVIDIA GPU present: the 8-bit atoms hold the slots the
/// generator's table says (on the GPU: the hardware layout equals the table, which the Sim
/// shares).
#[test]
fn sm90_8bit_atom_one_hot_probes_on_every_device() {
    let devs: Vec<Device> = devices()
        .into_iter()
        .filter(|d| d.target() == Target::Sm90)
        .collect();
    assert!(devs.iter().any(|d| d.backend() == Backend::Sim));
    for dev in devs {
        for (_, atom) in flydsl_devtools::proof::SM90_8BIT_PROBES {
            one_hot_8bit(&dev, atom);
        }
    }
}

/// On an NVIDIA GPU: the sm_90 Sim computes the same D fragments as the hardware for random
/// small-integer inputs (exact products and sums) of every 8-bit atom, lane by lane.
#[test]
fn sim_8bit_atoms_agree_with_hardware() {
    let gpus: Vec<Device> = gpus()
        .into_iter()
        .filter(|d| d.target() == Target::Sm90)
        .collect();
    if gpus.is_empty() {
        flydsl_testutil::gpu::skip(
            "no NVIDIA GPU present (the Sim side is covered by \
             sm90_8bit_atom_one_hot_probes_on_every_device)",
        );
        return;
    }
    let mut rng = Rng::new(5);
    for dev in gpus {
        let sim = Device::new_sim(Target::Sm90);
        let w = dev.wave_size();
        for (_, atom) in flydsl_devtools::proof::SM90_8BIT_PROBES {
            let (na, nb, _) = atom.frag_lanes(w);
            let lim = if atom == MmaAtom::MmaM16N8K32S8 {
                127
            } else {
                3
            };
            let mut rnd = |len: u32| -> Vec<i32> {
                (0..len)
                    .map(|_| (rng.next_u64() % (2 * lim + 1)) as i32 - lim as i32)
                    .collect()
            };
            for _ in 0..8 {
                let (a, b) = (rnd(w * na), rnd(w * nb));
                assert_eq!(
                    probe8(&dev, atom, &a, &b),
                    probe8(&sim, atom, &a, &b),
                    "{} {atom:?}",
                    dev.name()
                );
            }
        }
    }
}

#[test]
fn sim_scalar_target_is_what_was_asked() {
    for t in Target::ALL {
        assert_eq!(Device::new_sim(t).wave_size(), t.wave_size());
    }
}
