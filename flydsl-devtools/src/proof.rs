//! Proof kernels: small kernels that exercise the generator end to end on every target
//! (and the runtime's backends): a vector add, a block reduction using shuffles and LDS, and
//! a tiled matmul on each target's matrix-core atom with a run-time K loop and LDS staging.

use flydsl_dsl::ir::{Kernel, MmaAtom, ScalarType, Target};
use flydsl_dsl::*;

mod hopper;
mod readme;
pub use hopper::{
    hopper_misc, HOPPER_MISC_BLOCK, HOPPER_MISC_DEC_REGS, HOPPER_MISC_REGS, HOPPER_MISC_ROW_PITCH,
    HOPPER_MISC_WARP_ELEMS,
};
pub use readme::tile_gemm;

/// Threads per block of [`vadd`].
pub const VADD_BLOCK: u32 = 256;
/// Threads per block of [`block_sum`].
pub const SUM_BLOCK: u32 = 256;

/// `c[i] = a[i] + b[i]` for `i < n`, one element per thread, blocks of [`VADD_BLOCK`].
///
/// ```
/// let k = flydsl_devtools::proof::vadd(flydsl_dsl::ir::Target::Gfx942, flydsl_dsl::ir::ScalarType::F32).unwrap();
/// assert_eq!(k.name, "vadd_f32");
/// ```
pub fn vadd(target: Target, dt: ScalarType) -> Result<Kernel, BuildError> {
    KernelBuilder::new(&format!("vadd_{dt}"), target, VADD_BLOCK).build(|k| {
        let a = k.tensor("a", dt);
        let b = k.tensor("b", dt);
        let c = k.tensor_mut("c", dt);
        let n = k.scalar("n", ScalarType::I32);
        let i = block_id_x() * VADD_BLOCK + thread_id_x();
        if_(i.lt(n), || c.store(i, a.load(i) + b.load(i)));
    })
}

/// `out[r] = sum(x[r*n .. r*n+n])` for each row `r` (one block of [`SUM_BLOCK`] threads per
/// row): a strided per-thread sum, a wave butterfly of shuffles, one LDS slot per wave.
pub fn block_sum(target: Target) -> Result<Kernel, BuildError> {
    KernelBuilder::new("block_sum_f32", target, SUM_BLOCK).build(|k| {
        let x = k.tensor("x", ScalarType::F32);
        let out = k.tensor_mut("out", ScalarType::F32);
        let n = k.scalar("n", ScalarType::I32);
        let scratch = k.lds("partials", ScalarType::F32, SUM_BLOCK / target.wave_size());
        let row = block_id_x();
        let tid = thread_id_x();
        let base = row.cast(ScalarType::I64) * n.cast(ScalarType::I64);
        let xr = x.offset(base);
        let acc = for_range(tid, n, c_i32(SUM_BLOCK as i32), &[c_f32(0.0)], |i, acc| {
            vec![acc[0] + xr.load(i)]
        });
        let total = block_reduce(acc[0], SUM_BLOCK, scratch, 0.0f32, |a, b| a + b);
        if_(tid.eq(0), || out.store(row, total));
    })
}

/// Threads per block of [`segment_reverse`].
pub const REVERSE_BLOCK: u32 = 256;

/// `y[s*n + i] = x[s*n + n-1-i]` for each segment `s` of `n` elements (one block of
/// [`REVERSE_BLOCK`] threads per segment), staged through two arrays carved from the dynamic
/// LDS region with the run-time length `n`: the values (f32) and the permutation (i32). The
/// launch gives `flydsl_ir::dynamic_lds_layout(&[(F32, n), (I32, n)])` bytes of dynamic LDS.
///
/// ```
/// let k = flydsl_devtools::proof::segment_reverse(flydsl_dsl::ir::Target::Sm90).unwrap();
/// assert!(k.dynamic_lds.is_some());
/// ```
pub fn segment_reverse(target: Target) -> Result<Kernel, BuildError> {
    KernelBuilder::new("segment_reverse_f32", target, REVERSE_BLOCK).build(|k| {
        let x = k.tensor("x", ScalarType::F32);
        let y = k.tensor_mut("y", ScalarType::F32);
        let n = k.scalar("n", ScalarType::I32);
        let mut region = k.lds_dynamic("segment");
        let vals = region.array(ScalarType::F32, n);
        let perm = region.array(ScalarType::I32, n);
        let tid = thread_id_x();
        let base = block_id_x().cast(ScalarType::I64) * n.cast(ScalarType::I64);
        let (xs, ys) = (x.offset(base), y.offset(base));
        let step = c_i32(REVERSE_BLOCK as i32);
        for_range_(tid, n, step, |i| {
            vals.store(i, xs.load(i));
            perm.store(i, n - 1 - i);
        });
        barrier();
        for_range_(tid, n, step, |i| ys.store(i, vals.load(perm.load(i))));
    })
}

/// The name of [`tiled_mma`]'s kernel for an input dtype.
pub fn tiled_mma_name(dt: ScalarType) -> String {
    format!("tiled_mma_{dt}")
}

/// Block tiling of [`tiled_mma_with`]: `warps` waves each computing `reps` atoms of C, a K
/// step of `bk` per pipeline stage, `stages` LDS buffers (>= 2), and how tiles reach LDS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmConfig {
    /// Waves along M and N.
    pub warps: (u32, u32),
    /// Atoms per wave along M and N.
    pub reps: (u32, u32),
    /// K per stage (a multiple of the atom's K and of 8).
    pub bk: u32,
    /// LDS stages (>= 2).
    pub stages: u32,
    /// Move tiles global -> LDS with `cp.async` ([`flydsl_dsl::tile::CopyAtom::CpAsync`],
    /// sm_90 only) instead of through registers.
    pub async_copy: bool,
    /// Read A and B fragments from LDS with `ldmatrix` where the atom allows it (sm_90;
    /// [`flydsl_dsl::tile::TiledMma::with_ldmatrix`]).
    pub ldmatrix: bool,
}

impl GemmConfig {
    /// The proof kernels' tiling on `target`: 2 x 2 waves of 64 x 64 C each (a 128 x 128
    /// block tile; 32 x 32 per wave on gfx1201/gfx1250), BK 32, 2 stages; `cp.async` where
    /// the target has it.
    ///
    /// ```
    /// use flydsl_devtools::proof::GemmConfig;
    /// use flydsl_dsl::ir::Target;
    /// assert!(GemmConfig::for_target(Target::Sm90).async_copy);
    /// assert!(!GemmConfig::for_target(Target::Gfx942).async_copy);
    /// ```
    pub fn for_target(target: Target) -> GemmConfig {
        let atom = MmaAtom::native_16bit(target, true);
        let (m, n, _) = atom.shape();
        // RDNA's 16 x 16 WMMA keeps 8 f32 per lane per atom (wave32): 64 x 64 per wave would
        // spill, so the gfx12 waves take 32 x 32 (a 64 x 64 block tile).
        let per_wave = match target {
            Target::Gfx1201 | Target::Gfx1250 => 32,
            _ => 64,
        };
        GemmConfig {
            warps: (2, 2),
            reps: (per_wave / m, per_wave / n),
            bk: 32,
            stages: 2,
            async_copy: flydsl_dsl::tile::CopyAtom::CpAsync.available(target),
            ldmatrix: true,
        }
    }
}

/// `C[M,N] (f32) = A[M,K] * B[N,K]^T` with A and B row-major `dt` (f16 or bf16): the
/// pipelined tile-layer GEMM with [`GemmConfig::for_target`].
pub fn tiled_mma(target: Target, dt: ScalarType) -> Result<Kernel, BuildError> {
    tiled_mma_with(
        target,
        dt,
        GemmConfig::for_target(target),
        &tiled_mma_name(dt),
    )
}

/// The host-side bounds of [`tiled_mma`]: `k` a multiple of 8 (16-byte rows for the 128-bit
/// copies), `tile_m * k`, `tile_n * k` and `tile_m * n` below 2^31 (offsets inside one
/// block's row panel are i32; panels start at i64 offsets), all extents >= 1.
pub fn tiled_mma_check(target: Target, m: usize, n: usize, k: usize) -> Result<(), String> {
    let c = GemmConfig::for_target(target);
    let atom = MmaAtom::native_16bit(target, true);
    let tm = (c.warps.0 * c.reps.0 * atom.shape().0) as usize;
    let tn = (c.warps.1 * c.reps.1 * atom.shape().1) as usize;
    let lim = 1usize << 31;
    if m == 0 || n == 0 || k == 0 || !k.is_multiple_of(8) {
        return Err(format!(
            "tiled_mma: (m, n, k) = ({m}, {n}, {k}): all >= 1, k a multiple of 8"
        ));
    }
    if m >= lim || n >= lim || tm * k >= lim || tn * k >= lim || tm * n >= lim {
        return Err(format!(
            "tiled_mma: (m, n, k) = ({m}, {n}, {k}): a row panel passes 2^31 elements"
        ));
    }
    Ok(())
}

/// Grid and block of a [`tiled_mma`] launch for an `m x n` C (one block per C tile).
pub fn tiled_mma_launch(target: Target, m: usize, n: usize) -> ([u32; 3], [u32; 3]) {
    let c = GemmConfig::for_target(target);
    let (am, an, _) = MmaAtom::native_16bit(target, true).shape();
    let (tm, tn) = (
        (c.warps.0 * c.reps.0 * am) as usize,
        (c.warps.1 * c.reps.1 * an) as usize,
    );
    let threads = c.warps.0 * c.warps.1 * target.wave_size();
    (
        [n.div_ceil(tn) as u32, m.div_ceil(tm) as u32, 1],
        [threads, 1, 1],
    )
}

/// [`tiled_mma`] with an explicit tiling. Grid `(ceil(N / tile_n), ceil(M / tile_m))`,
/// `warps.0 * warps.1` waves per block. Each block: A and B tiles move global -> registers
/// (128-bit, zero-filled past M, N, K) -> XOR-16 swizzled LDS with `stages` buffers; tile
/// `t + stages - 1` is loaded while tile `t` feeds the matrix atoms; one barrier per K step.
/// With `cfg.async_copy` (sm_90) the tiles move by `cp.async` instead (zero-filled by the
/// copy), one commit group per tile: step `t` waits for tile `t`'s group, syncs, issues tile
/// `t + stages - 1` into the stage step `t - 1` read, and computes on tile `t`.
pub fn tiled_mma_with(
    target: Target,
    dt: ScalarType,
    cfg: GemmConfig,
    name: &str,
) -> Result<Kernel, BuildError> {
    use flydsl_dsl::tile::*;
    let fail = |e: TileError| BuildError::Invalid {
        kernel: name.to_string(),
        target,
        reason: e.to_string(),
    };
    let atom = MmaAtom::native_16bit(target, dt == ScalarType::BF16);
    let mma = TiledMma::new(atom, target, cfg.warps, cfg.reps)
        .map_err(fail)?
        .with_ldmatrix(cfg.ldmatrix);
    let (bm, bn, bk, s) = (mma.tile_m(), mma.tile_n(), cfg.bk as i64, cfg.stages);
    let threads = mma.threads();
    let copy_atom = if cfg.async_copy {
        CopyAtom::CpAsync
    } else {
        CopyAtom::best_global(target)
    };
    let copy_a = TiledCopy::new(copy_atom, dt, threads, (bm, bk)).map_err(fail)?;
    let copy_b = TiledCopy::new(copy_atom, dt, threads, (bn, bk)).map_err(fail)?;
    let (lay_a, lay_b) = (
        smem_xor16(bm, bk, dt).map_err(fail)?,
        smem_xor16(bn, bk, dt).map_err(fail)?,
    );
    if s < 2 || bk % mma.atom_k() != 0 {
        return Err(fail(flydsl_dsl::tile::TileError::Invalid {
            func: "tiled_mma_with",
            arg: "cfg",
            value: format!("{cfg:?}"),
            rule: format!(
                "stages >= 2 and bk a multiple of the atom's K {}",
                mma.atom_k()
            ),
        }));
    }
    KernelBuilder::new(name, target, threads).build(|k| {
        let (a, b) = (k.tensor("a", dt), k.tensor("b", dt));
        let c = k.tensor_mut("c", ScalarType::F32);
        let i32_ = ScalarType::I32;
        let (m, n, kk) = (
            k.scalar("m", i32_),
            k.scalar("n", i32_),
            k.scalar("k", i32_),
        );
        let sa_mem = k.lds("a_tiles", dt, STensor::elems(&lay_a, s) as u32);
        let sb_mem = k.lds("b_tiles", dt, STensor::elems(&lay_b, s) as u32);
        let sa = STensor::new(sa_mem, lay_a.clone(), s).unwrap();
        let sb = STensor::new(sb_mem, lay_b.clone(), s).unwrap();
        let tid = thread_id_x();
        let (bx, by) = (block_id_x(), block_id(flydsl_dsl::ir::Dim::Y));
        let (ga, gb) = (GTensor::new(a, m, kk), GTensor::new(b, n, kk));
        // Tile t of K of this block's A and B row panels.
        let a_tile = |t: Val| ga.local_tile((bm, bk), (by, t));
        let b_tile = |t: Val| gb.local_tile((bn, bk), (bx, t));
        let (ca, cb) = (copy_a.partition(tid), copy_b.partition(tid));
        let thr = mma.thr_slice(tid);
        let k_tiles = (kk + (bk - 1) as i32) / bk as i32;
        let stage = |t: Val| t % s as i32;
        // Prologue: tiles 0 .. s-2 into stages 0 .. s-2 (one cp.async group each).
        for t in 0..s - 1 {
            let t = c_i32(t as i32);
            copy(&ca, &a_tile(t), &sa.stage(t));
            copy(&cb, &b_tile(t), &sb.stage(t));
            if cfg.async_copy {
                flydsl_dsl::nv::cp_async_commit();
            }
        }
        if !cfg.async_copy {
            barrier();
        }
        let acc0 = mma.zero_acc();
        let mma_step = |acc: Frag, t: Val| {
            let mut acc = acc;
            let (a_s, b_s) = (sa.stage(stage(t)), sb.stage(stage(t)));
            for k0 in (0..bk).step_by(mma.atom_k() as usize) {
                acc = thr.gemm(&acc, &thr.partition_a(&a_s, k0), &thr.partition_b(&b_s, k0));
            }
            acc
        };
        let acc = for_range(c_i32(0), k_tiles, c_i32(1), acc0.vals(), |t, carried| {
            let acc = acc0.with_vals(carried.to_vec());
            let next = t + (s - 1) as i32;
            let acc = if cfg.async_copy {
                // Tile t's group has landed once at most the s - 2 newer ones are in flight;
                // the barrier publishes it and retires the reads of the stage tile t - 1
                // used, which tile t + s - 1 (zeros past K) now overwrites.
                flydsl_dsl::nv::cp_async_wait(s - 2);
                barrier();
                copy(&ca, &a_tile(next), &sa.stage(stage(next)));
                copy(&cb, &b_tile(next), &sb.stage(stage(next)));
                flydsl_dsl::nv::cp_async_commit();
                mma_step(acc, t)
            } else {
                // Start the global loads of tile t + s - 1 (zeros past K) ...
                let (ra, rb) = (ca.load(&a_tile(next)), cb.load(&b_tile(next)));
                // ... while tile t feeds the matrix atoms ...
                let acc = mma_step(acc, t);
                // ... then park it in the stage tile t - 1 used (read before the last barrier).
                ca.store(&ra, &sa.stage(stage(next)));
                cb.store(&rb, &sb.stage(stage(next)));
                barrier();
                acc
            };
            acc.vals().to_vec()
        });
        if cfg.async_copy {
            // Retire the trailing (zero-fill) copies before the kernel ends.
            flydsl_dsl::nv::cp_async_wait(0);
        }
        let gc = GTensor::new(c, m, n).local_tile((bm, bn), (by, bx));
        thr.store_c(&acc0.with_vals(acc), &gc, ScalarType::F32);
    })
}

/// A kernel description: the IR of one kernel for one target.
pub type KernelFn = fn(Target) -> Result<Kernel, BuildError>;

/// Every proof kernel with its name, for a build script to declare:
/// `for (name, gen) in proof::ALL { builder = builder.kernel(name, gen) }`.
///
/// ```
/// use flydsl_devtools::proof;
/// assert!(proof::ALL.iter().any(|(name, _)| *name == "vadd_f32"));
/// ```
pub const ALL: [(&str, KernelFn); 8] = [
    ("vadd_f32", |t| vadd(t, ScalarType::F32)),
    ("vadd_f16", |t| vadd(t, ScalarType::F16)),
    ("block_sum_f32", block_sum),
    ("segment_reverse_f32", segment_reverse),
    ("tiled_mma_f16", |t| tiled_mma(t, ScalarType::F16)),
    ("tiled_mma_bf16", |t| tiled_mma(t, ScalarType::BF16)),
    ("mma_probe_f16", |t| mma_probe(t, ScalarType::F16)),
    ("mma_probe_bf16", |t| mma_probe(t, ScalarType::BF16)),
];

/// Proof kernels that exist only on some targets, with those targets, for a build script to
/// declare: `for (name, on, gen) in proof::ALL_ON { builder = builder.kernel_on(name, on, gen) }`.
/// Today: the raw probes of the sm_90 8-bit `mma.sync` atoms ([`SM90_8BIT_PROBES`]) and
/// [`hopper_misc`] (`setmaxnreg`, `elect.sync`, `stmatrix` / `ldmatrix`).
///
/// ```
/// use flydsl_devtools::proof;
/// use flydsl_dsl::ir::Target;
/// for (name, on, gen) in proof::ALL_ON {
///     assert_eq!(gen(on[0]).unwrap().name, name);
/// }
/// ```
pub const ALL_ON: [(&str, &[Target], KernelFn); 4] = [
    (SM90_8BIT_PROBES[0].0, &[Target::Sm90], |t| {
        mma_probe_atom(t, SM90_8BIT_PROBES[0].1, SM90_8BIT_PROBES[0].0)
    }),
    (SM90_8BIT_PROBES[1].0, &[Target::Sm90], |t| {
        mma_probe_atom(t, SM90_8BIT_PROBES[1].1, SM90_8BIT_PROBES[1].0)
    }),
    (SM90_8BIT_PROBES[2].0, &[Target::Sm90], |t| {
        mma_probe_atom(t, SM90_8BIT_PROBES[2].1, SM90_8BIT_PROBES[2].0)
    }),
    ("hopper_misc", &[Target::Sm90], hopper_misc),
];

/// The sm_90 8-bit `mma.sync` atoms probed by [`mma_probe_atom`], with their kernel names
/// (declared through [`ALL_ON`], sm_90 only).
pub const SM90_8BIT_PROBES: [(&str, MmaAtom); 3] = [
    ("mma_probe_e4m3", MmaAtom::MmaM16N8K32E4M3),
    ("mma_probe_e5m2", MmaAtom::MmaM16N8K32E5M2),
    ("mma_probe_s8", MmaAtom::MmaM16N8K32S8),
];

/// The name of [`mma_probe`]'s kernel.
pub fn mma_probe_name(dt: ScalarType) -> String {
    format!("mma_probe_{dt}")
}

/// Raw matrix-atom probe of the target's native 16-bit atom: [`mma_probe_atom`] with
/// `MmaAtom::native_16bit(target, dt == BF16)`, named [`mma_probe_name`].
pub fn mma_probe(target: Target, dt: ScalarType) -> Result<Kernel, BuildError> {
    let atom = MmaAtom::native_16bit(target, dt == ScalarType::BF16);
    mma_probe_atom(target, atom, &mma_probe_name(dt))
}

/// Raw matrix-atom probe: one wave; lane `l` loads its A, B and C fragments from
/// `a[l*na ..]`, `b[l*nb ..]`, `c[l*nc ..]` (no layout applied; A and B of the atom's input
/// type, C and D of its accumulator type), issues `atom` once and stores its D fragment to
/// `d[l*nc ..]`. Comparing the Sim with real hardware on one-hot inputs checks that both
/// agree on every lane-to-element map. An atom `target` lacks is a build error.
///
/// ```
/// use flydsl_devtools::proof::mma_probe_atom;
/// use flydsl_dsl::ir::{MmaAtom, Target};
/// let k = mma_probe_atom(Target::Sm90, MmaAtom::MmaM16N8K32S8, "probe_s8").unwrap();
/// assert_eq!(k.params.len(), 4);
/// assert!(mma_probe_atom(Target::Gfx942, MmaAtom::MmaM16N8K32S8, "probe_s8").is_err());
/// ```
pub fn mma_probe_atom(target: Target, atom: MmaAtom, name: &str) -> Result<Kernel, BuildError> {
    let (na, nb, nc) = atom.frag_lanes(target.wave_size());
    let (it, at) = (atom.in_type(target), atom.acc_type());
    KernelBuilder::new(name, target, target.wave_size()).build(|k| {
        let a = k.tensor("a", it);
        let b = k.tensor("b", it);
        let c = k.tensor("c", at);
        let d = k.tensor_mut("d", at);
        let l = thread_id_x();
        let gather = |t: Tensor, n: u32| {
            vec_of(
                &(0..n)
                    .map(|e| t.load(l * n as i32 + e as i32))
                    .collect::<Vec<_>>(),
            )
        };
        let r = mma(atom, gather(a, na), gather(b, nb), gather(c, nc));
        for v in 0..nc {
            d.store(l * nc as i32 + v as i32, r.at(v));
        }
    })
}
