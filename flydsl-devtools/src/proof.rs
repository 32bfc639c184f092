//! Proof kernels: small kernels that exercise the generator end to end on every target
//! (and the runtime's backends): a vector add, a block reduction using shuffles and LDS, and
//! a tiled matmul on each target's matrix-core atom with a run-time K loop and LDS staging.

use flydsl_dsl::atoms::AtomLayout;
use flydsl_dsl::ir::{Kernel, MmaAtom, ScalarType, Target};
use flydsl_dsl::*;

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

/// `C[M,N] (f32) = A[M,K] * B[N,K]^T` with A, B row-major `dt` (f16 or bf16), one wave per
/// block computing one atom tile; grid `(N / tile_n, M / tile_m)`; M, N, K multiples of the
/// atom's tile. Each K step stages the A and B tiles through LDS, then every lane gathers its
/// fragments per the atom's documented lane layout and issues the target's matrix
/// instruction (MFMA, WMMA or mma.sync).
pub fn tiled_mma(target: Target, dt: ScalarType) -> Result<Kernel, BuildError> {
    let atom = MmaAtom::native_16bit(target, dt == ScalarType::BF16);
    let (tm, tn, tk) = atom.shape();
    let ws = target.wave_size();
    let lay = AtomLayout::new(atom, target);
    let (na, nb, nc) = lay.frag_lens();
    KernelBuilder::new(&tiled_mma_name(dt), target, ws).build(|k| {
        let a = k.tensor("a", dt);
        let b = k.tensor("b", dt);
        let c = k.tensor_mut("c", ScalarType::F32);
        let m = k.scalar("m", ScalarType::I32);
        let n = k.scalar("n", ScalarType::I32);
        let kk = k.scalar("k", ScalarType::I32);
        let a_s = k.lds("a_tile", dt, tm * tk);
        let b_s = k.lds("b_tile", dt, tn * tk);
        let _ = m;
        let lane = thread_id_x();
        let m0 = block_id(flydsl_dsl::ir::Dim::Y) * tm as i32;
        let n0 = block_id_x() * tn as i32;
        let zero = cnst(
            flydsl_dsl::ir::Type::vec(ScalarType::F32, nc),
            flydsl_dsl::ir::Const::Float(0.0),
        );
        let acc = for_range(c_i32(0), kk, c_i32(tk as i32), &[zero], |k0, acc| {
            // Stage: thread t copies elements t, t+ws, ... of each row-major tile.
            for (tile, src, rows, r0) in [(a_s, a, tm, m0), (b_s, b, tn, n0)] {
                for j in 0..(rows * tk).div_ceil(ws) {
                    let idx = lane + (j * ws) as i32;
                    let r = idx / tk as i32;
                    let col = idx % tk as i32;
                    let g = (r0 + r).cast(ScalarType::I64) * kk.cast(ScalarType::I64)
                        + (k0 + col).cast(ScalarType::I64);
                    if (j + 1) * ws <= rows * tk {
                        tile.store(idx, src.load(g));
                    } else {
                        if_(idx.lt((rows * tk) as i32), || tile.store(idx, src.load(g)));
                    }
                }
            }
            barrier();
            let frag = |tile: Lds, len: u32, is_a: bool| {
                let elems: Vec<Val> = (0..len)
                    .map(|e| {
                        let (r, col) = if is_a {
                            let p = lay.a(lane, e);
                            (p.row, p.col) // A[i][k]
                        } else {
                            let p = lay.b(lane, e);
                            (p.col, p.row) // B[k][j] = Bt[j][k]
                        };
                        tile.load(r * tk as i32 + col)
                    })
                    .collect();
                vec_of(&elems)
            };
            let fa = frag(a_s, na, true);
            let fb = frag(b_s, nb, false);
            let d = mma(atom, fa, fb, acc[0]);
            barrier();
            vec![d]
        });
        for v in 0..nc {
            let p = lay.c(lane, v);
            let g = (m0 + p.row).cast(ScalarType::I64) * n.cast(ScalarType::I64)
                + (n0 + p.col).cast(ScalarType::I64);
            c.store(g, acc[0].at(v));
        }
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
/// Today: the raw probes of the sm_90 8-bit `mma.sync` atoms ([`SM90_8BIT_PROBES`]).
///
/// ```
/// use flydsl_devtools::proof;
/// use flydsl_dsl::ir::Target;
/// for (name, on, gen) in proof::ALL_ON {
///     assert_eq!(gen(on[0]).unwrap().name, name);
/// }
/// ```
pub const ALL_ON: [(&str, &[Target], KernelFn); 3] = [
    (SM90_8BIT_PROBES[0].0, &[Target::Sm90], |t| {
        mma_probe_atom(t, SM90_8BIT_PROBES[0].1, SM90_8BIT_PROBES[0].0)
    }),
    (SM90_8BIT_PROBES[1].0, &[Target::Sm90], |t| {
        mma_probe_atom(t, SM90_8BIT_PROBES[1].1, SM90_8BIT_PROBES[1].0)
    }),
    (SM90_8BIT_PROBES[2].0, &[Target::Sm90], |t| {
        mma_probe_atom(t, SM90_8BIT_PROBES[2].1, SM90_8BIT_PROBES[2].0)
    }),
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
