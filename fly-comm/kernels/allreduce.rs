//! The all-reduce kernels: one-stage, two-stage, and one-stage + residual add + RMSNorm.
//!
//! Parameters, in the launcher's order (`src/launch.rs` packs them): `sig0..sig{ws-1}` (each
//! rank's signal area, `i32`), `data0..data{ws-1}` (each rank's staging area: its input),
//! two-stage only `tmp0..tmp{ws-1}` (each rank's scratch area), `out`; fused only `residual`,
//! `weight`, `residual_out`; then the scalars `timeout` (i64, steady-counter ticks per wait),
//! `rank`, `n` (elements), `desc` (the call descriptor every rank must agree on); fused only
//! `m` (rows), `cols`, `eps`.
//!
//! Every workgroup `b` meets workgroup `b` of every peer in cross-rank barriers: lane `t < ws`
//! stores the call's flag value into rank `t`'s slot `flags[phase][b][rank]` with a
//! system-scope release and polls its own slot `flags[phase][b][t]` with system-scope
//! acquires (bounded by `timeout`). The flag value is the workgroup's call counter + 1 (kept
//! in device memory, so graph replays advance it). Sums run in f32 over the ranks in rank
//! order 0..ws, so every rank and both algorithms give the same bits.
//!
//! i32 bounds: element indices stay below `n + THREADS * MAX_BLOCKS`, and the API keeps
//! `n <= MAX_ELEMS` (2^30), so no index wraps.

use crate::config::*;
use flydsl_dsl::ir::{Kernel, ScalarType, ScalarType::*, Target};
use flydsl_dsl::*;

/// The kernel's parameters.
struct P {
    ws: u32,
    dt: ScalarType,
    vec: u32,
    sigs: Vec<Tensor>,
    data: Vec<Tensor>,
    tmp: Vec<Tensor>,
    out: Tensor,
    timeout: Val,
    rank: Val,
    n: Val,
    desc: Val,
    codes: Lds,
    amd: bool,
}

/// Build `spec` for `target`.
pub fn build(spec: Spec, target: Target) -> Result<Kernel, BuildError> {
    KernelBuilder::new(&spec.name(), target, spec.kind.threads()).build(|k| {
        let ws = spec.world;
        let dt = spec.dt.scalar();
        let sigs = (0..ws)
            .map(|r| k.tensor_mut(&format!("sig{r}"), I32))
            .collect();
        let data = (0..ws).map(|r| k.tensor(&format!("data{r}"), dt)).collect();
        let tmp = match spec.kind {
            Kind::TwoStage => (0..ws)
                .map(|r| k.tensor_mut(&format!("tmp{r}"), dt))
                .collect(),
            _ => vec![],
        };
        let out = k.tensor_mut("out", dt);
        let fused = (spec.kind == Kind::FusedRmsNorm).then(|| {
            (
                k.tensor("residual", dt),
                k.tensor("weight", dt),
                k.tensor_mut("residual_out", dt),
            )
        });
        let timeout = k.scalar("timeout", I64);
        let rank = k.scalar("rank", I32);
        let n = k.scalar("n", I32);
        let desc = k.scalar("desc", I32);
        let codes = k.lds("codes", I32, MAX_WORLD);
        let p = P {
            ws,
            dt,
            vec: spec.vec(),
            sigs,
            data,
            tmp,
            out,
            timeout,
            rank,
            n,
            desc,
            codes,
            amd: target.is_amd(),
        };
        match (spec.kind, fused) {
            (Kind::FusedRmsNorm, Some((res, w, res_out))) => {
                let m = k.scalar("m", I32);
                let cols = k.scalar("cols", I32);
                let eps = k.scalar("eps", F32);
                let red = k.lds("red", F32, FUSED_THREADS / target.wave_size());
                body(&p, |p, _| {
                    fused_body(p, [res, w, res_out], m, cols, eps, red)
                });
            }
            (Kind::TwoStage, _) => body(&p, two_stage),
            _ => body(&p, |p, _| {
                one_stage(p, c_i32(0), p.n);
                c_i32(0)
            }),
        }
    })
}

/// `t`'s entry of `ts` chosen by the run-time `i` (a select chain; `i` in `0..ts.len()`).
fn pick(i: Val, ts: &[Tensor]) -> Tensor {
    let mut t = ts[0];
    for (r, tr) in ts.iter().enumerate().skip(1) {
        t = Tensor::select(i.eq(r as i32), tr, &t);
    }
    t
}

/// f32 lanes of `v`.
fn wide(v: Val) -> Val {
    if v.elem() == F32 {
        v
    } else {
        v.cast(F32)
    }
}

/// `v` (f32) in the element type `dt`.
fn narrow(v: Val, dt: ScalarType) -> Val {
    if dt == F32 {
        v
    } else {
        v.cast(dt)
    }
}

/// This rank's signal area.
fn me(p: &P) -> Tensor {
    pick(p.rank, &p.sigs)
}

/// The common frame: skip everything on a poisoned rank (an earlier wait timed out), read
/// the workgroup's call counter, the start barrier (with the descriptor check), the work
/// (`work(p, flag)` returns the outcome of its own barriers, 0 when fine), the end barrier, and the
/// counter update.
fn body(p: &P, work: impl FnOnce(&P, Val) -> Val) {
    let me = me(p);
    let poisoned = me.load(c_i32((STATUS_OFF + STATUS_TIMEOUTS) as i32)).ne(0);
    if_(!poisoned, || {
        let b = block_id_x();
        let flag = me.load(b + COUNTER_OFF as i32) + 1;
        let bad = cross_barrier(p, 0, flag, true);
        if_(bad.eq(0), || {
            let bad_mid = work(p, flag);
            if_(bad_mid.eq(0), || {
                cross_barrier(p, 2, flag, false);
            });
        });
        if_(thread_id_x().eq(0), || {
            me.store(b + COUNTER_OFF as i32, flag)
        });
    });
}

/// Cross-rank barrier `phase` of this workgroup with flag value `flag`; returns the worst
/// lane outcome (block-uniform): 0 all peers arrived, 1 a wait timed out, 2 a peer's call
/// descriptor differs (start barrier only). Timeouts and mismatches are also counted in the
/// status words.
fn cross_barrier(p: &P, phase: u32, flag: Val, with_desc: bool) -> Val {
    let tid = thread_id_x();
    let b = block_id_x();
    if p.amd {
        // The AMD workgroup barrier does not wait for other waves' global stores.
        fence_release();
    }
    barrier();
    let me = me(p);
    if_(tid.lt(p.ws as i32), || {
        let peer = pick(tid, &p.sigs);
        let row = (b + (phase * MAX_BLOCKS) as i32) * MAX_WORLD as i32;
        if with_desc {
            peer.store(b * MAX_WORLD as i32 + p.rank + DESC_OFF as i32, p.desc);
        }
        peer.flag_store(row + p.rank + FLAGS_OFF as i32, flag);
        let ok = me.flag_wait(row + tid + FLAGS_OFF as i32, flag, p.timeout);
        let mut code = select(ok, c_i32(0), c_i32(1));
        if with_desc {
            let theirs = me.load(b * MAX_WORLD as i32 + tid + DESC_OFF as i32);
            let differs = ok & theirs.ne(p.desc);
            code = select(differs, c_i32(2), code);
            if_(differs, || {
                me.atomic_add(c_i32((STATUS_OFF + STATUS_MISMATCHES) as i32), c_i32(1));
            });
        }
        if_(!ok, || {
            me.atomic_add(c_i32((STATUS_OFF + STATUS_TIMEOUTS) as i32), c_i32(1));
        });
        p.codes.store(tid, code);
    });
    barrier();
    let mut bad = p.codes.load(c_i32(0));
    for t in 1..p.ws {
        bad = bad.max(p.codes.load(c_i32(t as i32)));
    }
    bad
}

/// Global thread index and grid stride.
fn grid_pos() -> (Val, Val) {
    let threads = block_dim_x();
    (
        block_id_x() * threads + thread_id_x(),
        grid_dim_x() * threads,
    )
}

/// The f32 sum over the ranks, in rank order, of `lanes` elements at `e` of every staging area.
fn sum_at(p: &P, e: Val, lanes: u32) -> Val {
    let align = if lanes > 1 { 16 } else { 0 };
    let mut acc = wide(p.data[0].load_vec(e, lanes, align));
    for d in &p.data[1..] {
        acc = acc + wide(d.load_vec(e, lanes, align));
    }
    acc
}

/// One-stage reduction of the 128-bit packs `[pack_lo, pack_hi)` and of the scalar tail past
/// the last whole pack (done when `pack_hi` is the last pack).
fn one_stage(p: &P, pack_lo: Val, n: Val) {
    let (g, stride) = grid_pos();
    let v = p.vec as i32;
    let packs = n / v;
    for_range_(pack_lo + g, packs, stride, |i| {
        let e = i * v;
        p.out
            .store_aligned(e, narrow(sum_at(p, e, p.vec), p.dt), 16, false);
    });
    tail(p, packs * v, n);
}

/// The scalar tail `[from, n)`: every rank reduces it itself.
fn tail(p: &P, from: Val, n: Val) {
    let (g, stride) = grid_pos();
    for_range_(from + g, n, stride, |e| {
        p.out.store(e, narrow(sum_at(p, e, 1), p.dt));
    });
}

/// Two-stage: rank r reduces part r of the packs into its scratch area (the last rank also
/// takes the remainder), a barrier, then every rank gathers all parts; the scalar tail is
/// reduced by every rank. Returns the middle barrier's outcome.
fn two_stage(p: &P, flag: Val) -> Val {
    let (g, stride) = grid_pos();
    let v = p.vec as i32;
    let ws = p.ws as i32;
    let packs = p.n / v;
    let part = packs / ws;
    let last = packs - part * (ws - 1);
    let start = p.rank * part;
    let mine = select(p.rank.eq(ws - 1), last, part);
    let tmp_me = pick(p.rank, &p.tmp);
    for_range_(g, mine, stride, |i| {
        let s = sum_at(p, (start + i) * v, p.vec);
        tmp_me.store_aligned(i * v, narrow(s, p.dt), 16, false);
    });
    let bad = cross_barrier(p, 1, flag, false);
    if_(bad.eq(0), || {
        for_range_(g, last, stride, |i| {
            for (r, t) in p.tmp.iter().enumerate() {
                let r = r as i32;
                let inside = if r == ws - 1 {
                    c_i32(1).ne(0)
                } else {
                    i.lt(part)
                };
                if_(inside, || {
                    let x = t.load_vec(i * v, p.vec, 16);
                    p.out.store_aligned((i + part * r) * v, x, 16, false);
                });
            }
        });
        tail(p, packs * v, p.n);
    });
    bad
}

/// Fused: one workgroup per row (striding over rows); per row the one-stage sum of every
/// pack, rounded to the element type (the all-reduce's result), plus the residual, rounded
/// again (`residual_out`), then `y = r * rsqrt(mean(r^2) + eps) * weight`. Needs
/// `cols % vec == 0` (the API checks it). Returns 0 (it has no middle barrier).
fn fused_body(p: &P, [res, w, res_out]: [Tensor; 3], m: Val, cols: Val, eps: Val, red: Lds) -> Val {
    let v = p.vec as i32;
    let packs = cols / v;
    let tid = thread_id_x();
    let threads = block_dim_x();
    for_range_(block_id_x(), m, grid_dim_x(), |row| {
        let base = row * cols;
        let ss = for_range(tid, packs, threads, &[c_f32(0.0)], |i, acc| {
            let e = base + i * v;
            let x = wide(narrow(sum_at(p, e, p.vec), p.dt));
            let r = narrow(x + wide(res.load_vec(e, p.vec, 16)), p.dt);
            res_out.store_aligned(e, r, 16, false);
            let rf = wide(r);
            let sq = rf * rf;
            let mut s = acc[0];
            for l in 0..p.vec {
                s = s + sq.at(l);
            }
            vec![s]
        })[0];
        let total = block_reduce(ss, FUSED_THREADS, red, 0.0f32, |a, b| a + b);
        let rstd = (total / cols.cast(F32) + eps).rsqrt();
        for_range_(tid, packs, threads, |i| {
            let e = base + i * v;
            let r = wide(res_out.load_vec(e, p.vec, 16));
            let y = r * splat(rstd, p.vec) * wide(w.load_vec(i * v, p.vec, 16));
            p.out.store_aligned(e, narrow(y, p.dt), 16, false);
        });
    });
    c_i32(0)
}
