//! Property tests of `flydsl_dsl::layout` against brute-force enumeration over many random
//! small layouts (shape entries 1..=6, depth <= 2, compact and non-compact strides).

use std::cell::RefCell;
use std::collections::HashSet;

use flydsl_dsl::layout::{
    blocked_product, complement, composition, left_inverse, logical_divide, logical_product,
    raked_product, right_inverse, swizzle_fp8_128, swizzle_xor16, zipped_divide, ComposedLayout,
    Coord, IndexExpr, IntTuple, Layout, LayoutError, Swizzle, Tiler,
};

type R = Result<(), LayoutError>;

// ---------------------------------------------------------------------------------------------
// Deterministic random layouts.

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }
}

/// A random shape of depth <= 2 with entries in 1..=max_entry and size <= max_size.
fn rand_shape(rng: &mut Rng, max_entry: i64, max_size: i64) -> IntTuple {
    loop {
        let s = if rng.chance(1, 5) {
            IntTuple::Int(rng.range(1, max_entry))
        } else {
            let n = rng.range(1, 3);
            IntTuple::Tuple(
                (0..n)
                    .map(|_| {
                        if rng.chance(1, 3) {
                            let m = rng.range(1, 3);
                            IntTuple::Tuple(
                                (0..m)
                                    .map(|_| IntTuple::Int(rng.range(1, max_entry)))
                                    .collect(),
                            )
                        } else {
                            IntTuple::Int(rng.range(1, max_entry))
                        }
                    })
                    .collect(),
            )
        };
        if s.product() <= max_size {
            return s;
        }
    }
}

/// A tuple congruent with `like` with leaves from `vals`.
fn rebuild(like: &IntTuple, vals: &mut impl Iterator<Item = i64>) -> IntTuple {
    match like {
        IntTuple::Int(_) => IntTuple::Int(vals.next().unwrap()),
        IntTuple::Tuple(v) => IntTuple::Tuple(v.iter().map(|t| rebuild(t, vals)).collect()),
    }
}

/// Injective strides: leaves in random order, each starting at a multiple (1..=3) of the
/// extent so far. Such layouts always have a complement.
fn gapped_strides(rng: &mut Rng, shapes: &[i64]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    for i in (1..order.len()).rev() {
        let j = rng.range(0, i as i64) as usize;
        order.swap(i, j);
    }
    let mut strides = vec![0; shapes.len()];
    let mut current = 1;
    for i in order {
        let gap = if rng.chance(1, 3) { rng.range(2, 3) } else { 1 };
        strides[i] = current * gap;
        current = strides[i] * shapes[i];
    }
    strides
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Any,
    Injective,
}

fn rand_layout(rng: &mut Rng, kind: Kind, max_entry: i64, max_size: i64) -> Layout {
    let shape = rand_shape(rng, max_entry, max_size);
    let leaves = shape.leaves();
    let strides: Vec<i64> = match (kind, rng.range(0, 3)) {
        (Kind::Any, 0) => return Layout::col_major(shape).unwrap(),
        (Kind::Any, 1) => return Layout::row_major(shape).unwrap(),
        (Kind::Any, 2) => leaves.iter().map(|_| rng.range(0, 12)).collect(),
        _ => gapped_strides(rng, &leaves),
    };
    let stride = rebuild(&shape, &mut strides.into_iter());
    Layout::new(shape, stride).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Brute-force references.

/// Colexicographic leaf coordinates of `i` (every leaf taken modulo its extent).
fn ref_leaf_coords(shape: &IntTuple, i: i64) -> Vec<i64> {
    let mut p = 1;
    shape
        .leaves()
        .into_iter()
        .map(|s| {
            let c = (i / p) % s;
            p *= s;
            c
        })
        .collect()
}

fn ref_eval(l: &Layout, i: i64) -> i64 {
    let c = ref_leaf_coords(l.shape(), i);
    c.iter().zip(l.stride().leaves()).map(|(c, d)| c * d).sum()
}

fn ref_natural(l: &Layout, i: i64) -> IntTuple {
    rebuild(l.shape(), &mut ref_leaf_coords(l.shape(), i).into_iter())
}

/// CuTe's extension of a layout past its size: the last leaf mode is unbounded.
fn ref_eval_extended(l: &Layout, x: i64) -> i64 {
    let (shapes, strides) = (l.shape().leaves(), l.stride().leaves());
    let mut p = 1;
    let mut acc = 0;
    for (k, (s, d)) in shapes.iter().zip(&strides).enumerate() {
        let q = x / p;
        acc += if k + 1 == shapes.len() { q } else { q % s } * d;
        p *= s;
    }
    acc
}

fn image(l: &Layout) -> Vec<i64> {
    (0..l.size()).map(|i| l.call(&i).unwrap()).collect()
}

/// `l` with its stride-0 modes replaced by size-1 modes.
fn without_broadcast(l: &Layout) -> Layout {
    let shapes: Vec<i64> = l
        .shape()
        .leaves()
        .iter()
        .zip(l.stride().leaves())
        .map(|(s, d)| if d == 0 { 1 } else { *s })
        .collect();
    Layout::new(
        rebuild(l.shape(), &mut shapes.into_iter()),
        l.stride().clone(),
    )
    .unwrap()
}

fn is_injective(l: &Layout) -> bool {
    let img = image(l);
    img.iter().collect::<HashSet<_>>().len() == img.len()
}

/// Largest `shape * stride` over the non-trivial modes (the extent a complement completes).
fn extent(l: &Layout) -> i64 {
    l.shape()
        .leaves()
        .iter()
        .zip(l.stride().leaves())
        .filter(|(s, d)| **s > 1 && *d > 0)
        .map(|(s, d)| s * d)
        .max()
        .unwrap_or(1)
}

// ---------------------------------------------------------------------------------------------
// Coordinates.

#[test]
fn crd2idx_idx2crd_round_trip() -> R {
    let mut rng = Rng(1);
    for _ in 0..600 {
        let l = rand_layout(&mut rng, Kind::Any, 6, 400);
        for i in 0..l.size() {
            let crd = l.idx2crd(&i)?;
            assert_eq!(crd.as_int_tuple(), Some(ref_natural(&l, i)), "{l} idx {i}");
            let want = ref_eval(&l, i);
            assert_eq!(l.crd2idx(&crd)?, want, "{l} crd {crd}");
            assert_eq!(l.call(&i)?, want, "{l} call {i}");
            // Per-mode 1-D coordinates (a coarser profile) give the same offset.
            if let IntTuple::Tuple(_) = l.shape() {
                let per_mode: Vec<Coord<i64>> = l
                    .modes()
                    .iter()
                    .zip(match &crd {
                        Coord::Tuple(v) => v.clone(),
                        Coord::Int(_) => unreachable!(),
                    })
                    .map(|(m, c)| {
                        let sub = Layout::col_major(m.shape().clone()).unwrap();
                        Coord::Int(sub.crd2idx(&c).unwrap())
                    })
                    .collect();
                assert_eq!(
                    l.crd2idx(&Coord::Tuple(per_mode))?,
                    want,
                    "{l} per-mode {i}"
                );
            }
        }
        assert!(l.idx2crd(&l.size()).is_err());
        assert!(l.call(&-1i64).is_err());
        let mut bad = l.shape().leaves();
        let k = rng.range(0, bad.len() as i64 - 1) as usize;
        bad[k] += rng.range(0, 2);
        let bad = rebuild(l.shape(), &mut bad.into_iter());
        assert!(matches!(
            l.crd2idx(&Coord::from(bad)),
            Err(LayoutError::CoordOutOfRange { .. })
        ));
    }
    Ok(())
}

#[test]
fn coalesce_preserves_the_function() -> R {
    let mut rng = Rng(2);
    for _ in 0..600 {
        let l = rand_layout(&mut rng, Kind::Any, 6, 400);
        let c = l.coalesce();
        assert_eq!(c.size(), l.size());
        assert!(c.depth() <= 1, "{c}");
        let m = l.coalesce_modes();
        assert_eq!(m.rank(), l.rank());
        for (a, b) in m.modes().iter().zip(l.modes()) {
            assert_eq!(a.size(), b.size());
            assert!(a.depth() <= 1);
        }
        for i in 0..l.size() {
            let want = ref_eval(&l, i);
            assert_eq!(c.call(&i)?, want, "{l} -> {c} at {i}");
            assert_eq!(m.call(&i)?, want, "{l} -> {m} at {i}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Composition.

#[test]
fn composition_is_function_composition() -> R {
    let mut rng = Rng(3);
    let (mut ok, mut checked) = (0, 0);
    for n in 0..3000 {
        let a = rand_layout(&mut rng, Kind::Any, 6, 400);
        let b = match n % 3 {
            0 => rand_layout(&mut rng, Kind::Any, 6, a.size()),
            1 => rand_layout(&mut rng, Kind::Injective, 4, 64),
            // Mostly inside A's domain.
            _ => (0..20)
                .map(|k| rand_layout(&mut rng, [Kind::Any, Kind::Injective][k % 2], 6, a.size()))
                .find(|b| b.cosize() <= a.size())
                .unwrap_or_else(|| Layout::col_major(1).unwrap()),
        };
        let Ok(r) = composition(&a, &b) else { continue };
        ok += 1;
        assert_eq!(r.size(), b.size(), "{a} o {b} = {r}");
        // As in CuTe, A distributes over B's modes only when they do not overlap.
        if !is_injective(&without_broadcast(&b)) {
            continue;
        }
        if let IntTuple::Tuple(_) = b.shape() {
            assert_eq!(r.rank(), b.rank(), "{a} o {b} = {r}");
        }
        let flat_a = a.coalesce();
        for i in 0..b.size() {
            let x = b.call(&i)?;
            let got = r.call(&i)?;
            if x < a.size() {
                checked += 1;
                assert_eq!(got, ref_eval(&a, x), "{a} o {b} = {r} at {i}");
            } else {
                // Past size(A), A extends along its (coalesced) last mode, as in CuTe.
                assert_eq!(got, ref_eval_extended(&flat_a, x), "{a} o {b} = {r} at {i}");
            }
        }
    }
    assert!(ok > 2000, "only {ok} compositions succeeded");
    assert!(checked > 6000, "only {checked} points checked ({ok} ok)");
    Ok(())
}

#[test]
fn composition_with_compact_left_always_succeeds() -> R {
    let mut rng = Rng(4);
    for _ in 0..300 {
        let a = Layout::col_major(rand_shape(&mut rng, 6, 400))?;
        let b = rand_layout(&mut rng, Kind::Any, 6, a.size());
        let r = composition(&a, &b)?;
        for i in 0..b.size() {
            assert_eq!(r.call(&i)?, b.call(&i)?);
        }
    }
    Ok(())
}

#[test]
fn by_mode_composition_is_mode_wise() -> R {
    let mut rng = Rng(5);
    let mut ok = 0;
    for _ in 0..400 {
        let a = rand_layout(&mut rng, Kind::Any, 6, 400);
        let parts: Vec<Layout> = a
            .modes()
            .iter()
            .take(rng.range(1, a.rank() as i64) as usize)
            .map(|m| rand_layout(&mut rng, Kind::Injective, 3, m.size().max(1)))
            .collect();
        let tiler = Tiler::modes(parts.clone());
        let Ok(r) = composition(&a, &tiler) else {
            continue;
        };
        ok += 1;
        assert_eq!(r.rank(), a.rank());
        for (i, m) in a.modes().iter().enumerate() {
            let want = match parts.get(i) {
                Some(p) => composition(m, p)?,
                None => m.clone(),
            };
            assert_eq!(r.mode(i)?, want);
        }
    }
    assert!(ok > 100, "only {ok}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Complement and inverses.

#[test]
fn complement_completes_injective_layouts() -> R {
    let mut rng = Rng(6);
    for _ in 0..400 {
        let a = rand_layout(&mut rng, Kind::Injective, 6, 200);
        let m = extent(&a) * rng.range(1, 3);
        let c = complement(&a, m)?;
        let ac = Layout::concat(&[a.clone(), c.clone()])?;
        assert_eq!(ac.size(), m, "({a}, {c}) vs {m}");
        let mut img = image(&ac);
        img.sort_unstable();
        assert_eq!(
            img,
            (0..m).collect::<Vec<_>>(),
            "({a}, {c}) not onto [0,{m})"
        );
        check_complement_props(&a, &c);
    }
    Ok(())
}

#[test]
fn complement_of_any_layout_is_ordered_and_disjoint() -> R {
    let mut rng = Rng(7);
    let mut ok = 0;
    for _ in 0..800 {
        let a = rand_layout(&mut rng, Kind::Any, 6, 200);
        let m = a.cosize() * rng.range(1, 4);
        let Ok(c) = complement(&a, m) else { continue };
        ok += 1;
        check_complement_props(&a, &c);
        assert!(Layout::concat(&[a.clone(), c.clone()])?.cosize() >= m);
    }
    assert!(ok > 300, "only {ok}");
    Ok(())
}

fn check_complement_props(a: &Layout, c: &Layout) {
    let img_a: HashSet<i64> = image(a).into_iter().collect();
    let img_c = image(c);
    for i in 1..img_c.len() {
        assert!(img_c[i - 1] < img_c[i], "complement {c} of {a} not ordered");
        assert!(!img_a.contains(&img_c[i]), "complement {c} of {a} hits A");
    }
}

#[test]
fn inverses_invert() -> R {
    let mut rng = Rng(8);
    for _ in 0..600 {
        let l = rand_layout(&mut rng, Kind::Any, 6, 200);
        let r = right_inverse(&l)?;
        for i in 0..r.size() {
            assert_eq!(l.call(&r.call(&i)?)?, i, "right_inverse {r} of {l}");
        }
        if is_injective(&l) {
            if let Ok(li) = left_inverse(&l) {
                for i in 0..l.size() {
                    assert_eq!(li.call(&l.call(&i)?)?, i, "left_inverse {li} of {l}");
                }
            }
        }
        let g = rand_layout(&mut rng, Kind::Injective, 6, 200);
        let li = left_inverse(&g)?;
        for i in 0..g.size() {
            assert_eq!(li.call(&g.call(&i)?)?, i, "left_inverse {li} of {g}");
        }
        // Compact layouts have a full right inverse.
        let c = Layout::row_major(g.shape().clone())?;
        assert_eq!(right_inverse(&c)?.size(), c.size());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Divide and product.

#[test]
fn logical_divide_is_composition_with_tiler_and_complement() -> R {
    let mut rng = Rng(9);
    let (mut ok, mut perm) = (0, 0);
    for _ in 0..800 {
        let a = rand_layout(&mut rng, Kind::Any, 6, 400);
        let b = rand_layout(&mut rng, Kind::Injective, 4, a.size());
        let Ok(d) = logical_divide(&a, &b) else {
            continue;
        };
        ok += 1;
        let bb = Layout::concat(&[b.clone(), complement(&b, a.size())?])?;
        assert_eq!(d, composition(&a, &bb)?);
        assert_eq!(d.mode(0)?, composition(&a, &b)?);
        assert_eq!(zipped_divide(&a, &b)?.mode(0)?, composition(&a, &b)?);
        for i in 0..d.size() {
            let x = bb.call(&i)?;
            if x < a.size() {
                assert_eq!(d.call(&i)?, ref_eval(&a, x), "{a} / {b} = {d} at {i}");
            }
        }
        if a.size() % extent(&b) == 0 {
            // (B, B*) is a permutation of [0, size(A)): the divide permutes A's offsets.
            perm += 1;
            let (mut x, mut y) = (image(&a), image(&d));
            x.sort_unstable();
            y.sort_unstable();
            assert_eq!(x, y, "{a} / {b} = {d}");
        }
    }
    assert!(ok > 400 && perm > 100, "ok {ok} perm {perm}");
    Ok(())
}

#[test]
fn logical_product_is_a_and_replicated_b() -> R {
    let mut rng = Rng(10);
    let mut ok = 0;
    for n in 0..800 {
        let a = rand_layout(&mut rng, Kind::Injective, 4, 64);
        let a = if n % 2 == 0 {
            Layout::row_major(a.shape().clone())?
        } else {
            a
        };
        let b = rand_layout(&mut rng, Kind::Injective, 4, 64);
        let p = match logical_product(&a, &b) {
            Ok(p) => p,
            // A layout with holes may leave no room for B's modes (as in CuTe); a compact
            // one always can.
            Err(_) if a.cosize() > a.size() => continue,
            Err(e) => return Err(e),
        };
        ok += 1;
        assert_eq!(p.mode(0)?, a);
        assert_eq!(p.size(), a.size() * b.size());
        let c = complement(&a, a.size() * b.cosize())?;
        let tiles = p.mode(1)?;
        for j in 0..b.size() {
            let x = b.call(&j)?;
            assert!(x < c.size(), "{b}({j}) outside complement {c}");
            assert_eq!(tiles.call(&j)?, c.call(&x)?, "{a} x {b} = {p}");
        }
        assert!(is_injective(&p), "{a} x {b} = {p} not injective");
    }
    assert!(ok > 500, "only {ok}");
    Ok(())
}

/// A compact (column- or row-major) layout with a flat tuple shape of rank 1..=3.
fn rand_compact(rng: &mut Rng) -> Layout {
    let n = rng.range(1, 3);
    let shape = IntTuple::Tuple((0..n).map(|_| IntTuple::Int(rng.range(1, 4))).collect());
    if rng.chance(1, 2) {
        Layout::col_major(shape).unwrap()
    } else {
        Layout::row_major(shape).unwrap()
    }
}

/// All per-mode coordinates of a flat-tuple shape, padded to rank `r` with zeros.
fn all_coords(l: &Layout, r: usize) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for k in 0..r {
        let n = l.mode(k).map(|m| m.size()).unwrap_or(1);
        out = out
            .into_iter()
            .flat_map(|c| {
                (0..n).map(move |x| {
                    let mut c = c.clone();
                    c.push(x);
                    c
                })
            })
            .collect();
    }
    out
}

fn at(l: &Layout, c: &[i64]) -> i64 {
    let c: Vec<Coord<i64>> = c[..l.rank()].iter().map(|&x| Coord::Int(x)).collect();
    l.crd2idx(&Coord::Tuple(c)).unwrap()
}

#[test]
fn blocked_and_raked_products_rearrange_bijectively() -> R {
    let mut rng = Rng(11);
    for _ in 0..200 {
        let (a, b) = (rand_compact(&mut rng), rand_compact(&mut rng));
        let r = a.rank().max(b.rank());
        let n = a.size() * b.size();
        let blocked = blocked_product(&a, &b)?;
        let raked = raked_product(&a, &b)?;
        for p in [&blocked, &raked] {
            assert_eq!(p.rank(), r);
            let mut img = image(p);
            img.sort_unstable();
            assert_eq!(img, (0..n).collect::<Vec<_>>(), "{a} * {b} = {p}");
        }
        let size_of = |l: &Layout, k: usize| l.mode(k).map(|m| m.size()).unwrap_or(1);
        for ca in all_coords(&a, r) {
            for cb in all_coords(&b, r) {
                let want = at(&a, &ca) + a.size() * at(&b, &cb);
                let blk: Vec<i64> = (0..r).map(|k| ca[k] + size_of(&a, k) * cb[k]).collect();
                let rak: Vec<i64> = (0..r).map(|k| cb[k] + size_of(&b, k) * ca[k]).collect();
                assert_eq!(at(&blocked, &blk), want, "blocked {a} * {b} = {blocked}");
                assert_eq!(at(&raked, &rak), want, "raked {a} * {b} = {raked}");
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Swizzle.

#[test]
fn swizzle_is_an_involutive_bijection() -> R {
    let mut count = 0;
    for bits in 0..=3u32 {
        for base in 0..=3u32 {
            for shift in -4..=4i32 {
                let sw = match Swizzle::new(bits, base, shift) {
                    Ok(sw) => sw,
                    Err(_) => {
                        assert!(bits > 0 && shift.unsigned_abs() < bits);
                        continue;
                    }
                };
                count += 1;
                let p = sw.period();
                for block in 0..2 {
                    let dom: Vec<i64> = (block * p..(block + 1) * p).collect();
                    let mut img: Vec<i64> = dom.iter().map(|x| sw.apply(x)).collect();
                    for (x, y) in dom.iter().zip(&img) {
                        assert_eq!(sw.apply(y), *x, "{sw} not an involution at {x}");
                    }
                    img.sort_unstable();
                    assert_eq!(img, dom, "{sw} not a bijection on block {block}");
                }
            }
        }
    }
    assert!(count > 50);
    // The composed layout is the swizzle of the layout.
    let l = Layout::row_major((8, 64))?;
    let sl = ComposedLayout::new(Swizzle::new(3, 3, 3)?, l.clone());
    for i in 0..l.size() {
        assert_eq!(sl.call(&i)?, sl.swizzle().apply(&l.call(&i)?));
    }
    let mut img = image_composed(&sl);
    img.sort_unstable();
    assert_eq!(img, (0..512).collect::<Vec<_>>());
    Ok(())
}

fn image_composed(l: &ComposedLayout) -> Vec<i64> {
    (0..l.size()).map(|i| l.call(&i).unwrap()).collect()
}

#[test]
fn xor16_swizzle_matches_flydsl_formula() -> R {
    for k in 1..=8i64 {
        for row in 0..32i64 {
            let cols: Vec<i64> = (0..k * 16).step_by(16).collect();
            for &col in &cols {
                assert_eq!(swizzle_xor16(&row, &col, k)?, col ^ ((row % k) * 16));
            }
            if k.count_ones() == 1 {
                // A row's 16-byte blocks are permuted among themselves.
                let mut got: Vec<i64> = cols
                    .iter()
                    .map(|c| swizzle_xor16(&row, c, k).unwrap())
                    .collect();
                got.sort_unstable();
                assert_eq!(got, cols);
            }
        }
    }
    for row in 0..64i64 {
        assert_eq!(swizzle_fp8_128(&row, &32), 32 ^ (((row % 16) / 2) * 16));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Generic IndexExpr: same values as i64, and no trivial work emitted.

thread_local! {
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// An index value that records every operation and flags trivial ones.
#[derive(Clone, Debug)]
struct Sym {
    v: i64,
    lit: bool,
}

fn dynamic(v: i64) -> Sym {
    Sym { v, lit: false }
}

fn record(op: String, lits: &[&Sym], trivial: bool) {
    let all_lit = lits.iter().all(|s| s.lit);
    let entry = if all_lit || trivial {
        format!("TRIVIAL {op}")
    } else {
        op
    };
    LOG.with(|l| l.borrow_mut().push(entry));
}

fn take_log() -> Vec<String> {
    LOG.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

impl IndexExpr for Sym {
    fn lit(v: i64) -> Self {
        Sym { v, lit: true }
    }
    fn add(&self, o: &Self) -> Self {
        let zero = (self.lit && self.v == 0) || (o.lit && o.v == 0);
        record("add".into(), &[self, o], zero);
        dynamic(self.v + o.v)
    }
    fn mul_lit(&self, k: i64) -> Self {
        record(format!("mul {k}"), &[self], k == 0 || k == 1);
        dynamic(self.v * k)
    }
    fn div_lit(&self, k: i64) -> Self {
        record(format!("div {k}"), &[self], k == 1);
        dynamic(self.v / k)
    }
    fn rem_lit(&self, k: i64) -> Self {
        record(format!("rem {k}"), &[self], k == 1);
        dynamic(self.v % k)
    }
    fn xor(&self, o: &Self) -> Self {
        let zero = (self.lit && self.v == 0) || (o.lit && o.v == 0);
        record("xor".into(), &[self, o], zero);
        dynamic(self.v ^ o.v)
    }
    fn and_lit(&self, m: i64) -> Self {
        record(format!("and {m}"), &[self], m == 0);
        dynamic(self.v & m)
    }
    fn shr_lit(&self, s: u32) -> Self {
        record(format!("shr {s}"), &[self], s == 0);
        dynamic(self.v >> s)
    }
    fn as_lit(&self) -> Option<i64> {
        self.lit.then_some(self.v)
    }
}

fn coord_values(c: &Coord<Sym>) -> IntTuple {
    match c {
        Coord::Int(s) => IntTuple::Int(s.v),
        Coord::Tuple(v) => IntTuple::Tuple(v.iter().map(coord_values).collect()),
    }
}

/// The natural coordinate of `i` with dynamic leaves, except leaves picked to be literal.
fn sym_coord(c: &Coord<i64>, rng: &mut Rng) -> Coord<Sym> {
    match c {
        Coord::Int(v) if rng.chance(1, 4) => Coord::Int(Sym::lit(*v)),
        Coord::Int(v) => Coord::Int(dynamic(*v)),
        Coord::Tuple(v) => Coord::Tuple(v.iter().map(|c| sym_coord(c, rng)).collect()),
    }
}

#[test]
fn generic_index_code_matches_i64_and_skips_trivial_work() -> R {
    let mut rng = Rng(12);
    take_log();
    for _ in 0..300 {
        let l = rand_layout(&mut rng, Kind::Any, 6, 200);
        let sw = Swizzle::new(2, rng.range(0, 2) as u32, 3)?;
        for i in 0..l.size() {
            let x = dynamic(i);
            assert_eq!(l.call(&x)?.v, l.call(&i)?);
            let crd = l.idx2crd(&x)?;
            let lit_crd = l.idx2crd(&i)?;
            assert_eq!(Some(coord_values(&crd)), lit_crd.as_int_tuple());
            let mixed = sym_coord(&lit_crd, &mut rng);
            assert_eq!(l.crd2idx(&mixed)?.v, l.crd2idx(&lit_crd)?);
            assert_eq!(sw.apply(&x).v, sw.apply(&i));
            assert_eq!(
                swizzle_xor16(&x, &dynamic(16), 3)?.v,
                swizzle_xor16(&i, &16, 3)?
            );
        }
        let log = take_log();
        assert!(
            log.iter().all(|e| !e.starts_with("TRIVIAL")),
            "{l}: {:?}",
            log.iter()
                .filter(|e| e.starts_with("TRIVIAL"))
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}

#[test]
fn generic_index_code_emits_minimal_ops() -> R {
    let x = dynamic(13);
    take_log();
    let ops = |f: &dyn Fn() -> Sym| -> (i64, Vec<String>) {
        take_log();
        let v = f().v;
        (v, take_log())
    };
    // Compact layouts coalesce to n:1: the index is the offset.
    let l = Layout::col_major((4, (2, 4)))?;
    assert_eq!(ops(&|| l.call(&x).unwrap()), (13, vec![]));
    // Powers of two become masks and shifts; the outer mode needs no remainder.
    let l = Layout::new((4, 8), (1, 16))?;
    assert_eq!(
        ops(&|| l.call(&x).unwrap()),
        (
            1 + 3 * 16,
            vec![
                "and 3".into(),
                "shr 2".into(),
                "mul 16".into(),
                "add".into()
            ]
        )
    );
    let l = Layout::new((3, 5), (5, 1))?;
    assert_eq!(
        ops(&|| l.call(&x).unwrap()),
        (
            5 + 4,
            vec!["rem 3".into(), "mul 5".into(), "div 3".into(), "add".into()]
        )
    );
    // Broadcast (stride-0) modes cost nothing.
    let l = Layout::new((4, 8), (0, 1))?;
    assert_eq!(ops(&|| l.call(&x).unwrap()), (3, vec!["shr 2".into()]));
    // Natural coordinates: literal-zero entries and unit strides are free.
    let l = Layout::new((4, 8), (1, 16))?;
    let c = Coord::Tuple(vec![Coord::Int(x.clone()), Coord::Int(Sym::lit(0))]);
    assert_eq!(ops(&|| l.crd2idx(&c).unwrap()), (13, vec![]));
    // Swizzle: mask, shift, xor.
    let sw = Swizzle::new(3, 4, 3)?;
    assert_eq!(
        ops(&|| sw.apply(&dynamic(0x80))),
        (0x90, vec!["and 896".into(), "shr 3".into(), "xor".into()])
    );
    // idx2crd on (4,8): mask for the inner leaf, shift for the outer one.
    let l = Layout::col_major((4, 8))?;
    take_log();
    let c = l.idx2crd(&x)?;
    assert_eq!(coord_values(&c), IntTuple::from((1, 3)));
    assert_eq!(take_log(), vec!["and 3".to_string(), "shr 2".to_string()]);
    Ok(())
}
