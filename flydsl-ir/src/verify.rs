//! The IR verifier: every value defined before use, every op well-typed, every atom legal on
//! the kernel's target, LDS within the target's limit.

use crate::kernel::*;
use crate::{AddrSpace, ScalarType, SrcLoc, Type, ValueId};
use std::collections::HashSet;

/// A verification failure naming the kernel, the op, where the op was written and the
/// reason. Displayed as `file:line:col: kernel `k` (target t): op #n `Name`: reason` when the
/// kernel's [`Kernel::src_locs`] knows the op's source line (kernels built with the DSL),
/// without the location prefix otherwise.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}kernel `{kernel}` (target {target}): op #{op} `{op_name}`: {reason}", loc_prefix(.loc))]
pub struct VerifyError {
    /// Kernel name.
    pub kernel: String,
    /// Target name.
    pub target: String,
    /// Position of the op in a pre-order walk (`0` for kernel-level errors).
    pub op: usize,
    /// The op's short name.
    pub op_name: String,
    /// What is wrong.
    pub reason: String,
    /// Where the op was written in the kernel's source, if recorded.
    pub loc: Option<SrcLoc>,
}

/// `"file:line:col: "` or nothing: the prefix of a diagnostic about an op written at `loc`.
pub fn loc_prefix(loc: &Option<SrcLoc>) -> String {
    loc.map(|l| format!("{l}: ")).unwrap_or_default()
}

/// Verify a kernel.
///
/// ```
/// use flydsl_ir::*;
/// let k = Kernel::empty("ok", Target::Gfx942);
/// assert!(verify(&k).is_ok());
/// ```
pub fn verify(k: &Kernel) -> Result<(), VerifyError> {
    verify_inner(k).map_err(|mut e| {
        e.loc = e.loc.or_else(|| k.src_locs.op(e.op));
        e
    })
}

fn verify_inner(k: &Kernel) -> Result<(), VerifyError> {
    let mut v = Verifier {
        k,
        defined: HashSet::new(),
        ever: HashSet::new(),
        scope: Vec::new(),
        counter: 0,
    };
    let err = |op_name: &str, reason: String| VerifyError {
        kernel: k.name.clone(),
        target: k.target.to_string(),
        op: 0,
        op_name: op_name.into(),
        reason,
        loc: None,
    };
    if k.lds_bytes() > k.target.max_lds_bytes() {
        return Err(err(
            "lds",
            format!(
                "static LDS of {} bytes exceeds the target's limit of {} bytes",
                k.lds_bytes(),
                k.target.max_lds_bytes()
            ),
        ));
    }
    let max = k.target.max_threads_per_block();
    if k.attrs.max_threads == 0 || k.attrs.max_threads > max {
        return Err(err(
            "attrs",
            format!("max_threads {} is outside 1..={max}", k.attrs.max_threads),
        ));
    }
    if let Some((i, t)) = k
        .values
        .iter()
        .enumerate()
        .find(|(_, t)| matches!(t, Type::Vector(_, n) if *n < 2))
    {
        return Err(err(
            "values",
            format!(
                "value %{i} has type {t}: a vector has 2..={} lanes (use a scalar for 1)",
                Type::MAX_LANES
            ),
        ));
    }
    if k.params.len() != k.param_values.len() {
        return Err(err(
            "params",
            "params and param_values differ in length".into(),
        ));
    }
    for vals in &k.param_values {
        for &p in vals {
            v.define(p).map_err(|r| err("param", r))?;
        }
    }
    v.block(&k.body, &[])?;
    if k.target == crate::Target::Sm90 {
        crate::wgmma_flow::check(k, operands_of).map_err(|(op, op_name, reason)| VerifyError {
            op,
            op_name,
            ..err("", reason)
        })?;
    }
    Ok(())
}

struct Verifier<'a> {
    k: &'a Kernel,
    defined: HashSet<ValueId>,
    ever: HashSet<ValueId>,
    scope: Vec<ValueId>,
    counter: usize,
}

fn op_name(kind: &OpKind) -> String {
    if let OpKind::Amd(a) = kind {
        return a.name().to_string();
    }
    let s = match kind {
        OpKind::Nv(nv) => format!("{nv:?}"),
        k => format!("{k:?}"),
    };
    s.split(['(', ' ', '{']).next().unwrap_or("?").to_string()
}

impl Verifier<'_> {
    fn define(&mut self, v: ValueId) -> Result<(), String> {
        if v.0 as usize >= self.k.values.len() {
            return Err(format!("value %{} has no type entry", v.0));
        }
        if !self.defined.insert(v) || self.ever.contains(&v) {
            return Err(format!("value %{} is defined twice", v.0));
        }
        self.ever.insert(v);
        self.scope.push(v);
        Ok(())
    }

    fn block(&mut self, b: &Block, yield_types: &[Type]) -> Result<(), VerifyError> {
        // Values defined in a region are visible only inside it (and its nested regions).
        let scope_start = self.scope.len();
        let r = self.block_inner(b, yield_types);
        for v in self.scope.drain(scope_start..) {
            self.defined.remove(&v);
        }
        r
    }

    fn block_inner(&mut self, b: &Block, yield_types: &[Type]) -> Result<(), VerifyError> {
        for &a in &b.args {
            self.define(a).map_err(|r| self.err("block", r))?;
        }
        for (i, op) in b.ops.iter().enumerate() {
            self.counter += 1;
            let at = self.counter;
            let is_last = i + 1 == b.ops.len();
            if let OpKind::Yield(vals) = &op.kind {
                if !is_last {
                    return Err(self.err_at(
                        at,
                        "Yield",
                        "yield must be the last op of a region".into(),
                    ));
                }
                let tys: Vec<Type> = vals.iter().map(|&v| self.k.ty(v)).collect();
                self.uses(at, "Yield", vals)?;
                if tys != yield_types {
                    return Err(self.err_at(
                        at,
                        "Yield",
                        format!("yields {tys:?} but the region must yield {yield_types:?}"),
                    ));
                }
                continue;
            }
            self.op(at, op)?;
            for &r in &op.results {
                self.define(r)
                    .map_err(|e| self.err_at(at, &op_name(&op.kind), e))?;
            }
        }
        let ends_in_yield = matches!(b.ops.last().map(|o| &o.kind), Some(OpKind::Yield(_)));
        if !yield_types.is_empty() && !ends_in_yield {
            return Err(self.err("region", "a region with results must end in a yield".into()));
        }
        Ok(())
    }

    fn err(&self, op: &str, reason: String) -> VerifyError {
        self.err_at(self.counter, op, reason)
    }

    fn err_at(&self, at: usize, op: &str, reason: String) -> VerifyError {
        VerifyError {
            kernel: self.k.name.clone(),
            target: self.k.target.to_string(),
            op: at,
            op_name: op.into(),
            reason,
            loc: None,
        }
    }

    fn uses(&self, at: usize, name: &str, vals: &[ValueId]) -> Result<(), VerifyError> {
        for v in vals {
            if !self.defined.contains(v) {
                return Err(self.err_at(
                    at,
                    name,
                    format!(
                        "uses %{} outside the region that defines it, or before its definition",
                        v.0
                    ),
                ));
            }
        }
        Ok(())
    }

    fn op(&mut self, at: usize, op: &Op) -> Result<(), VerifyError> {
        let name = op_name(&op.kind);
        let k = self.k;
        let t = |v: ValueId| k.ty(v);
        let fail = |reason: String| Err(self.err_at(at, &name, reason));
        let nres = |n: usize| -> Result<(), VerifyError> {
            if op.results.len() != n {
                return Err(self.err_at(
                    at,
                    &name,
                    format!("expects {n} results, has {}", op.results.len()),
                ));
            }
            Ok(())
        };
        let rt = || t(op.results[0]);
        let is_num = |ty: Type| ty.value_elem().is_some();
        let is_i32 = |ty: Type| ty == Type::Scalar(ScalarType::I32);
        let is_index = |ty: Type| {
            matches!(
                ty,
                Type::Scalar(ScalarType::I32) | Type::Scalar(ScalarType::I64)
            )
        };
        let operands = operands_of(&op.kind);
        self.uses(at, &name, &operands)?;
        match &op.kind {
            OpKind::Const(c) => {
                nres(1)?;
                let ty = rt();
                match (c, ty.value_elem()) {
                    (Const::Int(_), Some(s)) if s.is_int() => {}
                    (Const::Float(_), Some(s)) if s.is_float() => {}
                    _ => return fail(format!("constant {c:?} does not fit type {ty}")),
                }
            }
            OpKind::Special(_) => {
                nres(1)?;
                if !is_i32(rt()) {
                    return fail("thread-geometry queries are i32".into());
                }
            }
            OpKind::Binary(bop, a, b) => {
                nres(1)?;
                if t(*a) != t(*b) || t(*a) != rt() || !is_num(t(*a)) {
                    return fail(format!(
                        "operand types {} and {} must equal the result {}",
                        t(*a),
                        t(*b),
                        rt()
                    ));
                }
                let e = t(*a).value_elem().unwrap();
                use BinOp::*;
                let int_only = matches!(
                    bop,
                    UDiv | URem | And | Or | Xor | Shl | LShr | AShr | UMin | UMax
                );
                let float_only = matches!(bop, MinNan | MaxNan);
                if (int_only && e.is_float()) || (float_only && e.is_int()) {
                    return fail(format!("{bop:?} is not defined for {e}"));
                }
                if e.is_fp8() {
                    return fail(
                        "fp8 is a storage type: convert to f16/f32 before arithmetic".into(),
                    );
                }
            }
            OpKind::Unary(uop, a) => {
                nres(1)?;
                if t(*a) != rt() || !is_num(rt()) {
                    return fail(format!("operand {} must equal the result {}", t(*a), rt()));
                }
                let e = rt().value_elem().unwrap();
                let float_only = !matches!(uop, UnOp::Neg | UnOp::Not | UnOp::Abs);
                if (float_only && e.is_int()) || (*uop == UnOp::Not && e.is_float()) {
                    return fail(format!("{uop:?} is not defined for {e}"));
                }
                if e.is_fp8() {
                    return fail("fp8 is a storage type: convert before arithmetic".into());
                }
            }
            OpKind::Fma(a, b, c) => {
                nres(1)?;
                if [t(*a), t(*b), t(*c)] != [rt(); 3]
                    || !rt()
                        .value_elem()
                        .is_some_and(|e| e.is_float() && !e.is_fp8())
                {
                    return fail(format!("fma needs three {} float operands", rt()));
                }
            }
            OpKind::Cmp(p, a, b) => {
                nres(1)?;
                let unsigned =
                    matches!(p, CmpPred::ULt | CmpPred::ULe | CmpPred::UGt | CmpPred::UGe);
                if unsigned && t(*a).value_elem().is_some_and(|e| e.is_float()) {
                    return fail(format!(
                        "{p:?} is an unsigned integer compare, not defined for {}: compare \
                         floats with Eq, Ne, Lt, Le, Gt or Ge",
                        t(*a)
                    ));
                }
                if t(*a) != t(*b)
                    || !is_num(t(*a))
                    || !rt().is_bool()
                    || rt().lanes() != t(*a).lanes()
                {
                    return fail(format!(
                        "compare of {} and {} must give i1 of the same lanes",
                        t(*a),
                        t(*b)
                    ));
                }
            }
            OpKind::Select(c, a, b) => {
                nres(1)?;
                let ok_cond = t(*c) == Type::Scalar(ScalarType::I1)
                    || (t(*c).is_bool() && t(*c).lanes() == rt().lanes());
                if t(*a) != t(*b) || t(*a) != rt() || !ok_cond {
                    return fail(format!(
                        "select({}, {}, {}) is ill-typed",
                        t(*c),
                        t(*a),
                        t(*b)
                    ));
                }
            }
            OpKind::Cast(kind, a) => {
                nres(1)?;
                let (from, to) = (t(*a), rt());
                match kind {
                    CastKind::Bitcast => {
                        if from.size_bytes() != to.size_bytes() || !is_num(from) || !is_num(to) {
                            return fail(format!("bitcast {from} -> {to} changes the size"));
                        }
                    }
                    _ => {
                        if !is_num(from) || !is_num(to) || from.lanes() != to.lanes() {
                            return fail(format!(
                                "convert {from} -> {to} needs numeric types of equal lanes"
                            ));
                        }
                    }
                }
            }
            OpKind::Splat(a) => {
                nres(1)?;
                if !matches!(t(*a), Type::Scalar(_)) || rt().value_elem() != t(*a).value_elem() {
                    return fail(format!("splat of {} into {}", t(*a), rt()));
                }
            }
            OpKind::Extract(v, i) => {
                nres(1)?;
                if *i >= t(*v).lanes()
                    || Type::Scalar(t(*v).value_elem().unwrap_or(ScalarType::I1)) != rt()
                    || !matches!(t(*v), Type::Vector(..))
                {
                    return fail(format!("extract {i} of {} as {}", t(*v), rt()));
                }
            }
            OpKind::Insert(v, s, i) => {
                nres(1)?;
                if *i >= t(*v).lanes()
                    || t(*v) != rt()
                    || Some(t(*s)) != t(*v).value_elem().map(Type::Scalar)
                {
                    return fail(format!("insert {} at {i} into {}", t(*s), t(*v)));
                }
            }
            OpKind::Build(vals) => {
                nres(1)?;
                if vals.len() as u32 != rt().lanes()
                    || vals
                        .iter()
                        .any(|&x| Some(t(x)) != rt().value_elem().map(Type::Scalar))
                    || vals.len() < 2
                {
                    return fail(format!("build of {} scalars into {}", vals.len(), rt()));
                }
            }
            OpKind::Slice(v, start) => {
                nres(1)?;
                if t(*v).value_elem() != rt().value_elem()
                    || start + rt().lanes() > t(*v).lanes()
                    || !matches!(t(*v), Type::Vector(..))
                {
                    return fail(format!("slice {start}..+{} of {}", rt().lanes(), t(*v)));
                }
            }
            OpKind::LdsBase(id) => {
                nres(1)?;
                let Some(arr) = k.lds.get(*id as usize) else {
                    return fail(format!("LDS array {id} does not exist"));
                };
                if rt() != Type::Ptr(AddrSpace::Shared, arr.elem) {
                    return fail("LDS base must be a shared pointer of the array's type".into());
                }
            }
            OpKind::DynLdsBase(off) => {
                nres(1)?;
                if k.dynamic_lds.is_none() {
                    return fail(
                        "the kernel declares no dynamic LDS region (set `dynamic_lds`)".into(),
                    );
                }
                if t(*off) != Type::s(ScalarType::I32) {
                    return fail(format!(
                        "dynamic LDS byte offset must be i32, not {}",
                        t(*off)
                    ));
                }
                if !matches!(rt(), Type::Ptr(AddrSpace::Shared, _)) {
                    return fail(format!(
                        "dynamic LDS base must be a shared pointer, not {}",
                        rt()
                    ));
                }
            }
            OpKind::PtrAdd(p, i) => {
                nres(1)?;
                if !matches!(t(*p), Type::Ptr(..)) || !is_index(t(*i)) || rt() != t(*p) {
                    return fail(format!("ptr_add({}, {})", t(*p), t(*i)));
                }
            }
            OpKind::Load { ptr, index, flags } => {
                nres(1)?;
                let Type::Ptr(_, e) = t(*ptr) else {
                    return fail(format!("load from non-pointer {}", t(*ptr)));
                };
                if !is_index(t(*index)) || rt().value_elem() != Some(e) {
                    return fail(format!(
                        "load of {} from {} with index {}",
                        rt(),
                        t(*ptr),
                        t(*index)
                    ));
                }
                self.check_align(at, &name, flags, rt())?;
            }
            OpKind::Store {
                ptr,
                index,
                value,
                flags,
            } => {
                nres(0)?;
                let Type::Ptr(sp, e) = t(*ptr) else {
                    return fail(format!("store to non-pointer {}", t(*ptr)));
                };
                if sp == AddrSpace::Constant {
                    return fail("store to constant memory".into());
                }
                if !is_index(t(*index)) || t(*value).value_elem() != Some(e) {
                    return fail(format!(
                        "store of {} to {} with index {}",
                        t(*value),
                        t(*ptr),
                        t(*index)
                    ));
                }
                self.check_align(at, &name, flags, t(*value))?;
            }
            OpKind::MakeRsrc { ptr, num_elems } => {
                nres(1)?;
                let Type::Ptr(AddrSpace::Global, e) = t(*ptr) else {
                    return fail("resource over a non-global pointer".into());
                };
                if t(*num_elems) != Type::Scalar(ScalarType::I64) || rt() != Type::BufferRsrc(e) {
                    return fail("make_rsrc(ptr, i64 count) gives rsrc<elem>".into());
                }
            }
            OpKind::BufferLoad { rsrc, index, flags } => {
                nres(1)?;
                let Type::BufferRsrc(e) = t(*rsrc) else {
                    return fail("buffer load needs a resource".into());
                };
                if !is_i32(t(*index)) || rt().value_elem() != Some(e) {
                    return fail(format!("buffer load of {} with index {}", rt(), t(*index)));
                }
                self.check_align(at, &name, flags, rt())?;
            }
            OpKind::BufferStore {
                rsrc,
                index,
                value,
                flags,
            } => {
                nres(0)?;
                let Type::BufferRsrc(e) = t(*rsrc) else {
                    return fail("buffer store needs a resource".into());
                };
                if !is_i32(t(*index)) || t(*value).value_elem() != Some(e) {
                    return fail(format!(
                        "buffer store of {} with index {}",
                        t(*value),
                        t(*index)
                    ));
                }
                self.check_align(at, &name, flags, t(*value))?;
            }
            OpKind::AtomicAdd { ptr, index, value } => {
                nres(1)?;
                let Type::Ptr(sp, e) = t(*ptr) else {
                    return fail("atomic on non-pointer".into());
                };
                if sp == AddrSpace::Constant
                    || !matches!(e, ScalarType::F32 | ScalarType::I32)
                    || t(*value) != Type::Scalar(e)
                    || rt() != t(*value)
                    || !is_index(t(*index))
                {
                    return fail(format!(
                        "atomic add of {} to {} (f32 or i32 only)",
                        t(*value),
                        t(*ptr)
                    ));
                }
            }
            OpKind::FlagStore { ptr, index, value } => {
                nres(0)?;
                if t(*ptr) != Type::Ptr(AddrSpace::Global, ScalarType::I32)
                    || !is_index(t(*index))
                    || !is_i32(t(*value))
                {
                    return fail(format!(
                        "flag store of {} to {} at {} (an i32 to a global i32 pointer)",
                        t(*value),
                        t(*ptr),
                        t(*index)
                    ));
                }
            }
            OpKind::FlagWait {
                ptr,
                index,
                expect,
                timeout,
            } => {
                nres(1)?;
                if t(*ptr) != Type::Ptr(AddrSpace::Global, ScalarType::I32)
                    || !is_index(t(*index))
                    || !is_i32(t(*expect))
                    || t(*timeout) != Type::s(ScalarType::I64)
                    || rt() != Type::s(ScalarType::I1)
                {
                    return fail(format!(
                        "flag wait on {} at {} for {} with timeout {} giving {} (global i32 \
                         pointer, i32 value, i64 timeout, i1 result)",
                        t(*ptr),
                        t(*index),
                        t(*expect),
                        t(*timeout),
                        rt()
                    ));
                }
            }
            OpKind::Barrier | OpKind::FenceRelease => nres(0)?,
            OpKind::Shuffle(_, v, lane) => {
                nres(1)?;
                if !matches!(t(*v), Type::Scalar(ScalarType::I32 | ScalarType::F32))
                    || rt() != t(*v)
                    || !is_i32(t(*lane))
                {
                    return fail(format!(
                        "shuffle of {} by {} (32-bit scalars only)",
                        t(*v),
                        t(*lane)
                    ));
                }
            }
            OpKind::ReadFirstLane(v) => {
                nres(1)?;
                if rt() != t(*v) || !matches!(t(*v), Type::Scalar(_)) {
                    return fail("readfirstlane takes a scalar".into());
                }
            }
            OpKind::Mma(atom, a, b, c) | OpKind::MmaScaled(atom, a, b, c, _, _) => {
                nres(1)?;
                let scaled = matches!(op.kind, OpKind::MmaScaled(..));
                if scaled != atom.is_scaled() {
                    return fail(if scaled {
                        format!("{atom:?} takes no scales: use Mma, not MmaScaled")
                    } else {
                        format!("{atom:?} is a scaled atom: use MmaScaled, not Mma")
                    });
                }
                if let OpKind::MmaScaled(_, _, _, _, sa, sb) = op.kind {
                    if !is_i32(t(sa)) || !is_i32(t(sb)) {
                        return fail(format!(
                            "{atom:?} scales are i32 scalars (four E8M0 bytes); got {}, {}",
                            t(sa),
                            t(sb)
                        ));
                    }
                }
                if !atom.supported_on(k.target) {
                    return fail(format!(
                        "matrix atom {atom:?} does not exist on {}",
                        k.target
                    ));
                }
                let (ta, tb, tc) = atom.operand_types(k.target);
                if t(*a) != ta || t(*b) != tb || t(*c) != tc || rt() != tc {
                    return fail(format!(
                        "{atom:?} on {} takes A {ta}, B {tb}, C {tc}; got {}, {}, {}",
                        k.target,
                        t(*a),
                        t(*b),
                        t(*c)
                    ));
                }
            }
            OpKind::If {
                cond,
                then_block,
                else_block,
            } => {
                if t(*cond) != Type::Scalar(ScalarType::I1) {
                    return fail(format!("if condition is {}, not i1", t(*cond)));
                }
                let tys: Vec<Type> = op.results.iter().map(|&r| t(r)).collect();
                if !then_block.args.is_empty() || !else_block.args.is_empty() {
                    return fail("if regions take no arguments".into());
                }
                self.block(then_block, &tys)?;
                self.block(else_block, &tys)?;
            }
            OpKind::For {
                lb,
                ub,
                step,
                init,
                body,
            } => {
                let iv_ty = t(*lb);
                if !is_index(iv_ty) || t(*ub) != iv_ty || t(*step) != iv_ty {
                    return fail(format!(
                        "for bounds and step must all be i32 or all i64; got {}, {}, {}",
                        t(*lb),
                        t(*ub),
                        t(*step)
                    ));
                }
                let tys: Vec<Type> = op.results.iter().map(|&r| t(r)).collect();
                let init_tys: Vec<Type> = init.iter().map(|&v| t(v)).collect();
                if tys != init_tys || body.args.len() != init.len() + 1 {
                    return fail("for results, init values and body arguments must match".into());
                }
                if t(body.args[0]) != iv_ty
                    || body.args[1..].iter().map(|&a| t(a)).collect::<Vec<_>>() != tys
                {
                    return fail(format!(
                        "for body args are [{iv_ty} iv (the bounds' type), carried...]"
                    ));
                }
                self.block(body, &tys)?;
            }
            OpKind::Yield(_) => return fail("yield outside a region".into()),
            OpKind::LdsAddr(p) => {
                nres(1)?;
                if !matches!(t(*p), Type::Ptr(AddrSpace::Shared, _)) || !is_i32(rt()) {
                    return fail(format!(
                        "LDS address of {} (an LDS pointer, giving i32)",
                        t(*p)
                    ));
                }
            }
            OpKind::Nv(nv) => {
                let tys: Vec<Type> = op.results.iter().map(|&r| t(r)).collect();
                if let Err(e) = nv.check(k.target, &t, &tys) {
                    return fail(e);
                }
            }
            OpKind::Amd(a) => {
                if let Err(r) = a.check(k.target, &|v| k.ty(v), &op.results) {
                    return fail(r);
                }
            }
        }
        Ok(())
    }

    fn check_align(
        &self,
        at: usize,
        name: &str,
        f: &MemFlags,
        ty: Type,
    ) -> Result<(), VerifyError> {
        let natural = ty.value_elem().map(|e| e.size_bytes()).unwrap_or(1);
        if f.align != 0 && (!f.align.is_power_of_two() || f.align < natural || f.align > 16) {
            return Err(self.err_at(
                at,
                name,
                format!(
                    "alignment {} is not a power of two in {natural}..=16",
                    f.align
                ),
            ));
        }
        if ty.size_bytes() > 16 || !ty.size_bytes().is_power_of_two() {
            return Err(self.err_at(
                at,
                name,
                format!(
                    "memory access of {ty} ({} bytes): use 1, 2, 4, 8 or 16 bytes",
                    ty.size_bytes()
                ),
            ));
        }
        Ok(())
    }
}

/// The SSA operands an op reads directly (not counting values used inside its regions).
pub fn operands_of(kind: &OpKind) -> Vec<ValueId> {
    match kind {
        OpKind::Const(_)
        | OpKind::Special(_)
        | OpKind::LdsBase(_)
        | OpKind::Barrier
        | OpKind::FenceRelease => vec![],
        OpKind::Binary(_, a, b)
        | OpKind::Cmp(_, a, b)
        | OpKind::PtrAdd(a, b)
        | OpKind::Shuffle(_, a, b) => vec![*a, *b],
        OpKind::Unary(_, a)
        | OpKind::Cast(_, a)
        | OpKind::Splat(a)
        | OpKind::DynLdsBase(a)
        | OpKind::Extract(a, _)
        | OpKind::Slice(a, _)
        | OpKind::ReadFirstLane(a)
        | OpKind::LdsAddr(a) => vec![*a],
        OpKind::Nv(nv) => nv.operands(),
        OpKind::Fma(a, b, c) | OpKind::Select(a, b, c) | OpKind::Mma(_, a, b, c) => {
            vec![*a, *b, *c]
        }
        OpKind::MmaScaled(_, a, b, c, sa, sb) => vec![*a, *b, *c, *sa, *sb],
        OpKind::Insert(a, b, _) => vec![*a, *b],
        OpKind::Build(v) | OpKind::Yield(v) => v.clone(),
        OpKind::Load { ptr, index, .. } => vec![*ptr, *index],
        OpKind::Store {
            ptr, index, value, ..
        } => vec![*ptr, *index, *value],
        OpKind::MakeRsrc { ptr, num_elems } => vec![*ptr, *num_elems],
        OpKind::BufferLoad { rsrc, index, .. } => vec![*rsrc, *index],
        OpKind::BufferStore {
            rsrc, index, value, ..
        } => vec![*rsrc, *index, *value],
        OpKind::AtomicAdd { ptr, index, value } => vec![*ptr, *index, *value],
        OpKind::FlagStore { ptr, index, value } => vec![*ptr, *index, *value],
        OpKind::FlagWait {
            ptr,
            index,
            expect,
            timeout,
        } => vec![*ptr, *index, *expect, *timeout],
        OpKind::If { cond, .. } => vec![*cond],
        OpKind::For {
            lb, ub, step, init, ..
        } => {
            let mut v = vec![*lb, *ub, *step];
            v.extend(init);
            v
        }
        OpKind::Amd(a) => a.operands(),
    }
}
