//! Reductions over the lanes of a vector, aligned groups of lanes of a wave, and the threads
//! of a block.
//!
//! Within a wave every reduction is a butterfly of `shuffle_xor`s, so every lane of a group
//! gets the result. Across waves the per-wave partials meet in LDS ([`Scratch`]) after one
//! barrier, and are combined either by a second butterfly over one partial per lane
//! ([`block_reduce_n`]: any run-time number of waves up to the wave size, log2(wave) steps)
//! or by every thread folding its team's partials in wave order ([`team_reduce`]: a
//! build-time team, any tuple merge; the same bits on every thread).

use crate::context::with;
use crate::control::if_;
use crate::mem::Lds;
use crate::val::{c_i32, cnst, lane_id, select, thread_id_x, Operand, Val};
use crate::wave::{barrier, shuffle_xor, wave_size};
use flydsl_ir::{Const, Type};

/// A reduction operator: the combine op of the reductions of this module.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::blocks::Op; use flydsl_dsl::ir::{ScalarType::F32, Target};
/// KernelBuilder::new("k", Target::Gfx942, 64).build(|_| {
///     let m = Op::Max.apply(c_f32(1.0), c_f32(2.0));
///     assert_eq!(m.elem(), F32);
///     assert!(Op::Max.idempotent() && !Op::Sum.idempotent());
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `a + b`.
    Sum,
    /// Float maxNum (a NaN operand is ignored) / signed integer max.
    Max,
    /// Float minNum / signed integer min.
    Min,
}

impl Op {
    /// `a op b`.
    #[track_caller]
    pub fn apply(self, a: Val, b: Val) -> Val {
        match self {
            Op::Sum => a + b,
            Op::Max => a.max(b),
            Op::Min => a.min(b),
        }
    }
    /// The identity of the op as a constant of type `ty`: 0, -inf (the signed minimum for
    /// integers), +inf (the signed maximum).
    #[track_caller]
    pub fn identity(self, ty: Type) -> Val {
        let e = ty.elem().unwrap_or(flydsl_ir::ScalarType::I32);
        let c = if e.is_float() {
            Const::Float(match self {
                Op::Sum => 0.0,
                Op::Max => f64::NEG_INFINITY,
                Op::Min => f64::INFINITY,
            })
        } else {
            let min = i64::MIN >> (64 - 8 * e.size_bytes());
            Const::Int(match self {
                Op::Sum => 0,
                Op::Max => min,
                Op::Min => !min,
            })
        };
        cnst(ty, c)
    }
    /// Whether `a op a == a` (max, min): a partial counted twice does not change the result,
    /// so padding lanes may repeat a partial instead of selecting the identity.
    pub fn idempotent(self) -> bool {
        !matches!(self, Op::Sum)
    }
}

/// Reduce the lanes of a vector with `f` as a balanced tree (pairs of neighbours, then pairs
/// of pairs): `lanes - 1` ops, `log2(lanes)` deep. A scalar is returned as is.
#[track_caller]
pub fn hreduce(v: Val, f: impl Fn(Val, Val) -> Val) -> Val {
    let mut xs = v.elems();
    while xs.len() > 1 {
        xs = xs
            .chunks(2)
            .map(|c| if c.len() == 2 { f(c[0], c[1]) } else { c[0] })
            .collect();
    }
    xs[0]
}

/// Reduce the lanes of a vector with `f` from the first lane to the last, `((v0 f v1) f v2)
/// ...`: as many ops as [`hreduce`], in the order of a sequential reference.
#[track_caller]
pub fn hfold(v: Val, f: impl Fn(Val, Val) -> Val) -> Val {
    let e = v.elems();
    let mut acc = e[0];
    for &x in &e[1..] {
        acc = f(acc, x);
    }
    acc
}

/// Sum of a vector's lanes ([`hreduce`]).
#[track_caller]
pub fn hsum(v: Val) -> Val {
    hreduce(v, |a, b| a + b)
}

/// Max (maxNum) of a vector's lanes ([`hreduce`]).
#[track_caller]
pub fn hmax(v: Val) -> Val {
    hreduce(v, |a, b| a.max(b))
}

/// The lanes of a wave that one reduction combines: aligned groups of consecutive lanes.
#[derive(Clone, Copy, Debug)]
pub enum Group {
    /// The whole wave.
    Wave,
    /// Groups of this many lanes, a power of two from 1 to the wave size, fixed at build time.
    Lanes(u32),
    /// Groups of a run-time number of lanes (an i32, a power of two from 1 to the wave size,
    /// uniform across the wave): every lane runs all log2(wave) steps, and a step wider than
    /// the group keeps its value (a select), so divergent group sizes are not needed.
    Dyn(Val),
}

/// Record a kernel-description error (the build returns it; nothing panics).
fn fail(msg: String) {
    with(|s| s.fail(msg));
}

/// The xor masks of a butterfly over groups of `g` lanes, widest first.
fn masks(g: Group) -> Vec<u32> {
    let ws = wave_size();
    let top = match g {
        Group::Wave | Group::Dyn(_) => ws,
        Group::Lanes(l) => {
            if !l.is_power_of_two() || l > ws {
                fail(format!(
                    "blocks::group_reduce: Group::Lanes({l}) on a wave of {ws}: the group \
                     must be a power of two from 1 to the wave size; reduce across waves with \
                     block_reduce_n or team_reduce"
                ));
                return vec![];
            }
            l
        }
    };
    let mut v = Vec::new();
    let mut m = top / 2;
    while m >= 1 {
        v.push(m);
        m /= 2;
    }
    v
}

/// A merge of two tuples of values into one.
type TupleMerge<'a> = dyn Fn(&[Val], &[Val]) -> Vec<Val> + 'a;

/// Butterfly over `masks` of the tuple `vals`, combined by `f`; with `dynamic`, a step whose
/// mask is not below the group keeps the old tuple.
#[track_caller]
fn butterfly(vals: &[Val], masks: &[u32], dynamic: Option<Val>, f: &TupleMerge) -> Vec<Val> {
    // Loops, not closures: the ops keep the caller's source location.
    let mut acc = vals.to_vec();
    for &m in masks {
        let mut o = Vec::with_capacity(acc.len());
        for &v in &acc {
            o.push(shuffle_xor(v, m as i32));
        }
        let mut c = f(&acc, &o);
        if let Some(l) = dynamic {
            for (c, &a) in c.iter_mut().zip(&acc) {
                *c = select(c_i32(m as i32).lt(l), *c, a);
            }
        }
        acc = c;
    }
    acc
}

/// [`butterfly`] of one value with an [`Op`] (no closure between the caller and its ops).
#[track_caller]
fn butterfly_op(v: Val, masks: &[u32], op: Op) -> Val {
    let mut acc = v;
    for &m in masks {
        acc = op.apply(acc, shuffle_xor(acc, m as i32));
    }
    acc
}

/// Reduce `v` (i32 or f32) over each group `g` of lanes with `f` (associative and
/// commutative); every lane of a group gets its group's result. The lanes of a wave must all
/// call it (uniform control flow within the wave).
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::blocks::{group_reduce, Group}; use flydsl_dsl::ir::Target;
/// KernelBuilder::new("k", Target::Gfx1201, 32).build(|k| {
///     let lanes = k.scalar("lanes", flydsl_dsl::ir::ScalarType::I32);
///     let x = thread_id_x().cast(flydsl_dsl::ir::ScalarType::F32);
///     let _ = group_reduce(x, Group::Dyn(lanes), |a, b| a + b);
/// }).unwrap();
/// ```
#[track_caller]
pub fn group_reduce(v: Val, g: Group, f: impl Fn(Val, Val) -> Val) -> Val {
    let dynamic = match g {
        Group::Dyn(l) => Some(l),
        _ => None,
    };
    butterfly(&[v], &masks(g), dynamic, &|a, b| vec![f(a[0], b[0])])[0]
}

/// Reduce several values together over each group `g` of lanes: one butterfly whose steps
/// shuffle every value, then combine the tuples with `f` (`f(a, b)` returns the merged tuple;
/// it may mix the values, as a merge of (count, mean, M2) does).
#[track_caller]
pub fn group_reduce_n(vals: &[Val], g: Group, f: impl Fn(&[Val], &[Val]) -> Vec<Val>) -> Vec<Val> {
    let dynamic = match g {
        Group::Dyn(l) => Some(l),
        _ => None,
    };
    butterfly(vals, &masks(g), dynamic, &f)
}

/// Reduce `v` across groups: over the lanes that hold the same position in every aligned
/// group of `group` lanes (lanes `l`, `l ^ group`, `l ^ 2 group`, ...; a power of two below
/// the wave size), narrowest step first. Every lane gets the result of its position. The
/// transpose of [`group_reduce`]: for columns held by consecutive lanes, rows by groups.
#[track_caller]
pub fn group_reduce_across(v: Val, group: u32, f: impl Fn(Val, Val) -> Val) -> Val {
    let ws = wave_size();
    if !group.is_power_of_two() || group > ws {
        fail(format!(
            "blocks::group_reduce_across: group {group} on a wave of {ws}: it must be a power \
             of two up to the wave size"
        ));
        return v;
    }
    let mut acc = v;
    let mut m = group;
    while m < ws {
        acc = f(acc, shuffle_xor(acc, m as i32));
        m *= 2;
    }
    acc
}

/// Sum over the whole wave ([`group_reduce`] over [`Group::Wave`]); every lane gets it.
#[track_caller]
pub fn wave_reduce_sum(v: Val) -> Val {
    butterfly_op(v, &masks(Group::Wave), Op::Sum)
}

/// Max (floats: maxNum) over the whole wave; every lane gets it.
#[track_caller]
pub fn wave_reduce_max(v: Val) -> Val {
    butterfly_op(v, &masks(Group::Wave), Op::Max)
}

/// Reduce over the whole wave with `f` (associative, commutative); every lane gets it.
#[track_caller]
pub fn wave_reduce(v: Val, f: impl Fn(Val, Val) -> Val) -> Val {
    group_reduce(v, Group::Wave, f)
}

/// The LDS slots a block reduction exchanges its per-wave partials through: value `j` of
/// wave `w` at slot `j * stride + w` of the array, offset by `region * region_len` when a
/// region is chosen ([`Scratch::region`]). Consecutive reductions without a barrier between
/// them must use different regions (the readers of one may still be reading).
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::blocks::Scratch; use flydsl_dsl::ir::{ScalarType::F32, Target};
/// KernelBuilder::new("k", Target::Gfx942, 256).build(|k| {
///     // Two regions of two values for up to 4 waves.
///     let s = Scratch::new(k.lds("red", F32, Scratch::len(2, 2, 4)), 4);
///     let _second = s.region(c_i32(1), 8);
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Scratch {
    lds: Lds,
    stride: u32,
    region: Option<(Val, u32)>,
}

impl Scratch {
    /// Slots of value `j` start at `j * stride` (`stride` >= the number of waves).
    pub fn new(lds: Lds, stride: u32) -> Scratch {
        Scratch {
            lds,
            stride,
            region: None,
        }
    }
    /// The same layout inside region `region` (a uniform i32) of `len` slots.
    pub fn region(self, region: Val, len: u32) -> Scratch {
        Scratch {
            region: Some((region, len)),
            ..self
        }
    }
    /// Slots for `regions` regions of `values` values of up to `waves` waves each.
    pub fn len(regions: u32, values: u32, waves: u32) -> u32 {
        regions * values * waves
    }
    /// The region's first slot (emitted once per reduction).
    #[track_caller]
    fn base(&self) -> Option<Val> {
        self.region.map(|(r, len)| r * len as i32)
    }
    /// Slot of value `j` of wave `w`: `base + w + j * stride` (the constant term only when
    /// there is a base or `j > 0`).
    #[track_caller]
    fn slot(&self, base: Option<Val>, w: Val, j: u32) -> Val {
        match base {
            Some(b) => b + w + (j * self.stride) as i32,
            None if j > 0 => w + (j * self.stride) as i32,
            None => w,
        }
    }
}

/// How many waves a butterfly finish combines.
#[derive(Clone, Copy)]
enum Waves {
    Fixed(u32),
    Run(Val),
}

/// Lane 0 of each wave stores the wave's `partials` in `s`, then one barrier. Returns the
/// thread id, the lane id and the region's base slot.
#[track_caller]
fn publish(partials: &[Val], s: &Scratch) -> (Val, Val, Option<Val>) {
    let tid = thread_id_x();
    let wave = tid / wave_size() as i32;
    let lane = lane_id();
    let base = s.base();
    if_(lane.eq(0), || {
        for (j, &p) in partials.iter().enumerate() {
            s.lds.store(s.slot(base, wave, j as u32), p);
        }
    });
    barrier();
    (tid, lane, base)
}

/// The cross-wave stage of a butterfly finish: lane 0 of each wave stores the wave's
/// partials, one barrier, then lane `l` takes wave `l`'s partial (lanes past the last wave: a
/// copy of the last wave's; `pad(j, lane, part)` may replace it) and `finish(j, part)`
/// reduces it over the wave.
#[track_caller]
fn exchange(
    partials: &[Val],
    s: &Scratch,
    waves: Waves,
    pad: &dyn Fn(usize, Val, Val) -> Val,
    finish: &dyn Fn(usize, Val) -> Val,
) -> Vec<Val> {
    let (_, lane, base) = publish(partials, s);
    let slot = match waves {
        Waves::Fixed(n) => lane.min(n as i32 - 1),
        Waves::Run(n) => lane.min(n - 1),
    };
    (0..partials.len())
        .map(|j| {
            let part = s.lds.load(s.slot(base, slot, j as u32));
            finish(j, pad(j, lane, part))
        })
        .collect()
}

/// `select(lane < waves, part, identity())`.
#[track_caller]
fn pad_with(waves: Waves, lane: Val, part: Val, identity: impl FnOnce() -> Operand) -> Val {
    let inside = match waves {
        Waves::Fixed(n) => lane.lt(n as i32),
        Waves::Run(n) => lane.lt(n),
    };
    select(inside, part, identity())
}

/// Reduce several f32 or i32 values over a block of `waves` waves (a run-time i32 from 1 to
/// the wave size, uniform; the block's threads are `waves` full waves), each value with its
/// own [`Op`], in one LDS exchange and one barrier: a wave butterfly per value, lane 0 of
/// each wave stores its partials in `scratch`, and a second butterfly over one partial per
/// lane. Every thread gets the results. Call from block-uniform control flow.
///
/// There is no trailing barrier: a caller that reduces again before a barrier must use
/// another region of `scratch` (rows alternating between two regions need none).
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::blocks::{block_reduce_n, Op, Scratch};
/// # use flydsl_dsl::ir::{ScalarType::F32, Target};
/// KernelBuilder::new("k", Target::Gfx942, 256).build(|k| {
///     let s = Scratch::new(k.lds("red", F32, 2 * 4), 4);
///     let x = thread_id_x().cast(F32);
///     let waves = block_dim_x() / 64;
///     let r = block_reduce_n(&[(x, Op::Sum), (x, Op::Max)], s, waves);
///     assert_eq!(r.len(), 2);
/// }).unwrap();
/// ```
#[track_caller]
pub fn block_reduce_n(vals: &[(Val, Op)], scratch: Scratch, waves: Val) -> Vec<Val> {
    let w: Vec<Val> = vals
        .iter()
        .map(|&(v, op)| butterfly_op(v, &masks(Group::Wave), op))
        .collect();
    let run = Waves::Run(waves);
    exchange(
        &w,
        &scratch,
        run,
        &|j, lane, part| {
            let op = vals[j].1;
            if op.idempotent() {
                part
            } else {
                pad_with(run, lane, part, || Operand::V(op.identity(part.ty())))
            }
        },
        &|j, part| {
            let op = vals[j].1;
            butterfly_op(part, &masks(Group::Wave), op)
        },
    )
}

/// Reduce `v` over the whole workgroup of `threads` threads (build-time, a multiple of the
/// wave size) with `f` (associative, commutative): a wave butterfly, one LDS slot per wave,
/// a barrier, then a butterfly over the waves' partials (lanes past the last wave take
/// `identity`). `scratch` must hold at least `threads / wave_size()` elements of `v`'s type.
/// Every thread gets the result. Ends with a barrier, so `scratch` may be reused at once;
/// contains two barriers: call from uniform control flow.
#[track_caller]
pub fn block_reduce(
    v: Val,
    threads: u32,
    scratch: Lds,
    identity: impl Into<Operand>,
    f: impl Fn(Val, Val) -> Val,
) -> Val {
    let ws = wave_size();
    let waves = threads.div_ceil(ws);
    let w = wave_reduce(v, &f);
    if waves == 1 {
        return w;
    }
    let fixed = Waves::Fixed(waves);
    let identity = identity.into();
    let r = exchange(
        &[w],
        &Scratch::new(scratch, waves),
        fixed,
        &|_, lane, part| pad_with(fixed, lane, part, || identity),
        &|_, part| wave_reduce(part, &f),
    )[0];
    // Keep the slots stable until every wave has read them (the caller may reuse `scratch`).
    barrier();
    r
}

/// Reduce a tuple of values over teams of `team` consecutive threads (build-time, a power of
/// two; a multiple of the wave size needs `scratch`) with the tuple merge `f`: a wave
/// butterfly ([`group_reduce_n`]), then, when a team spans several waves, lane 0 of each wave
/// stores its tuple (value `j` of wave `w` in slot `j * stride + w` of `scratch`), one
/// barrier, and every thread folds its team's tuples in wave order, so all threads of a team
/// get the same bits. Call from block-uniform control flow; no trailing barrier (a caller
/// reusing the slots separates this read from the next write by a barrier or a region).
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::blocks::{team_reduce, Scratch};
/// # use flydsl_dsl::ir::{ScalarType::F32, Target};
/// KernelBuilder::new("k", Target::Sm90, 256).build(|k| {
///     let s = Scratch::new(k.lds("red", F32, 2 * 8), 8);
///     let x = thread_id_x().cast(F32);
///     // (sum, max) over teams of 128 threads (4 waves of 32).
///     let r = team_reduce(&[x, x], 128, Some(s), |a, b| vec![a[0] + b[0], a[1].max(b[1])]);
///     assert_eq!(r.len(), 2);
/// }).unwrap();
/// ```
#[track_caller]
pub fn team_reduce(
    vals: &[Val],
    team: u32,
    scratch: Option<Scratch>,
    f: impl Fn(&[Val], &[Val]) -> Vec<Val>,
) -> Vec<Val> {
    let ws = wave_size();
    if !team.is_power_of_two() {
        fail(format!(
            "blocks::team_reduce: team {team} is not a power of two; use a power of two"
        ));
        return vals.to_vec();
    }
    let acc = group_reduce_n(vals, Group::Lanes(team.min(ws)), &f);
    if team <= ws {
        return acc;
    }
    let Some(s) = scratch else {
        fail(format!(
            "blocks::team_reduce: a team of {team} threads spans several waves of {ws}: pass \
             a Scratch of at least {} slots per value",
            team / ws
        ));
        return acc;
    };
    let (tid, _, base) = publish(&acc, &s);
    let per_team = team / ws;
    // The team's first wave (0 when the block is one team; computed all the same: constant
    // slots let LLVM merge the reads into 128-bit ones, which on gfx942 cost a softmax
    // forward an occupancy step).
    let first = tid / team as i32 * per_team as i32;
    let load = |k: u32| -> Vec<Val> {
        let w = if k == 0 { first } else { first + k as i32 };
        let mut v = Vec::with_capacity(acc.len());
        for j in 0..acc.len() as u32 {
            v.push(s.lds.load(s.slot(base, w, j)));
        }
        v
    };
    let mut r = load(0);
    for k in 1..per_team {
        let next = load(k);
        r = f(&r, &next);
    }
    r
}
