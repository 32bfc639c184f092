//! The index check's static part: which integer `Add`/`Sub`/`Mul`/`Shl` results flow into an
//! address (the index of a load, store, buffer access, atomic or `PtrAdd`, or a dynamic LDS
//! offset), so the executor checks exactly those for signed overflow at their IR width.
//!
//! The flow is followed backwards from each address operand through arithmetic (integer
//! add/sub/mul/shl/div/rem/min/max, neg/abs, integer conversions, selects, lane ops, vector
//! plumbing, loop-carried values and `If` results). It stops at bit-pattern operations (`And`,
//! `Or`, `Xor`, `Not`, shifts right, unsigned division and remainder, bitcasts): hashing and
//! masking wrap on purpose and their results are in range whatever the inputs did, so
//! `hash(i) & (n - 1)` used as an index is never reported.

use flydsl_ir::{BinOp, Block, CastKind, Kernel, OpKind, UnOp, ValueId};

/// One checked arithmetic op.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    /// The op, as `Mul (op #12)` (pre-order op number, as the verifier counts).
    pub op: String,
    /// The first address use found, as `index of Load (op #15)`.
    pub sink: String,
}

/// How a value was made, for the backward walk.
#[derive(Clone, Default)]
struct Def {
    /// Values whose wrap would carry into this one.
    sources: Vec<ValueId>,
    /// `Some(label)` when the value is the result of a checked op.
    checked: Option<String>,
}

struct Walk<'k> {
    k: &'k Kernel,
    defs: Vec<Def>,
    /// (address operand, sink label).
    sinks: Vec<(ValueId, String)>,
    counter: usize,
}

fn op_name(kind: &OpKind) -> String {
    let s = format!("{kind:?}");
    s.split(['(', ' ', '{']).next().unwrap_or("?").to_string()
}

fn yields(b: &Block) -> &[ValueId] {
    match b.ops.last().map(|o| &o.kind) {
        Some(OpKind::Yield(v)) => v,
        _ => &[],
    }
}

impl Walk<'_> {
    fn add_sources(&mut self, v: ValueId, src: &[ValueId]) {
        if let Some(d) = self.defs.get_mut(v.0 as usize) {
            d.sources.extend_from_slice(src);
        }
    }

    fn block(&mut self, b: &Block) {
        for op in &b.ops {
            self.counter += 1;
            let at = self.counter;
            let label = || format!("{} (op #{at})", op_name(&op.kind));
            let res = op.results.first().copied();
            let int_result = res
                .and_then(|r| self.k.values.get(r.0 as usize))
                .and_then(|t| t.value_elem())
                .is_some_and(|e| e.is_int() && e.bits() > 1);
            match &op.kind {
                OpKind::Binary(bop, a, b) if int_result => {
                    use BinOp::*;
                    let through = matches!(
                        bop,
                        Add | Sub | Mul | Shl | Div | Rem | Min | Max | UMin | UMax
                    );
                    if let (true, Some(r)) = (through, res) {
                        self.add_sources(r, &[*a, *b]);
                        if matches!(bop, Add | Sub | Mul | Shl) {
                            self.defs[r.0 as usize].checked = Some(format!("{bop:?} (op #{at})"));
                        }
                    }
                }
                OpKind::Unary(UnOp::Neg | UnOp::Abs, a) if int_result => {
                    self.add_sources(res.unwrap_or(*a), &[*a]);
                }
                OpKind::Cast(CastKind::Convert | CastKind::ConvertUnsigned, a) if int_result => {
                    let from_int = self.k.values[a.0 as usize]
                        .value_elem()
                        .is_some_and(|e| e.is_int());
                    if from_int {
                        self.add_sources(res.unwrap_or(*a), &[*a]);
                    }
                }
                OpKind::Select(_, a, b) => self.add_sources(res.unwrap_or(*a), &[*a, *b]),
                OpKind::ReadFirstLane(a)
                | OpKind::Shuffle(_, a, _)
                | OpKind::Splat(a)
                | OpKind::Extract(a, _)
                | OpKind::Slice(a, _) => self.add_sources(res.unwrap_or(*a), &[*a]),
                OpKind::Insert(a, s, _) => self.add_sources(res.unwrap_or(*a), &[*a, *s]),
                OpKind::Build(vs) => {
                    if let Some(r) = res {
                        self.add_sources(r, vs);
                    }
                }
                OpKind::Load { index, .. }
                | OpKind::Store { index, .. }
                | OpKind::BufferLoad { index, .. }
                | OpKind::BufferStore { index, .. }
                | OpKind::AtomicAdd { index, .. }
                | OpKind::FlagStore { index, .. }
                | OpKind::FlagWait { index, .. }
                | OpKind::PtrAdd(_, index) => {
                    self.sinks.push((*index, format!("index of {}", label())));
                }
                OpKind::Amd(
                    a @ (flydsl_ir::AmdOp::BufferLoadToLds { index, .. }
                    | flydsl_ir::AmdOp::LdsReadTr16 { index, .. }),
                ) => {
                    let name = a.name();
                    self.sinks
                        .push((*index, format!("index of {name} (op #{at})")));
                }
                OpKind::DynLdsBase(off) => {
                    self.sinks
                        .push((*off, format!("byte offset of {}", label())));
                }
                OpKind::If {
                    then_block,
                    else_block,
                    ..
                } => {
                    self.block(then_block);
                    self.block(else_block);
                    for (i, &r) in op.results.iter().enumerate() {
                        let src: Vec<ValueId> = [yields(then_block), yields(else_block)]
                            .iter()
                            .filter_map(|y| y.get(i).copied())
                            .collect();
                        self.add_sources(r, &src);
                    }
                }
                OpKind::For { init, body, .. } => {
                    self.block(body);
                    let ys = yields(body);
                    for (i, &iv0) in init.iter().enumerate() {
                        let src: Vec<ValueId> =
                            std::iter::once(iv0).chain(ys.get(i).copied()).collect();
                        if let Some(&arg) = body.args.get(i + 1) {
                            self.add_sources(arg, &src);
                        }
                        if let Some(&r) = op.results.get(i) {
                            self.add_sources(r, &src);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// For each value, the index of its [`Site`] when it must be checked; and the sites.
pub(crate) fn checked_arith(k: &Kernel) -> (Vec<Option<u32>>, Vec<Site>) {
    let mut w = Walk {
        k,
        defs: vec![Def::default(); k.values.len()],
        sinks: Vec::new(),
        counter: 0,
    };
    w.block(&k.body);
    let mut sink_of: Vec<Option<usize>> = vec![None; k.values.len()];
    let mut stack: Vec<(ValueId, usize)> = Vec::new();
    for (i, &(v, _)) in w.sinks.iter().enumerate() {
        stack.push((v, i));
    }
    while let Some((v, s)) = stack.pop() {
        let Some(slot) = sink_of.get_mut(v.0 as usize) else {
            continue;
        };
        if slot.is_some() {
            continue;
        }
        *slot = Some(s);
        for &src in &w.defs[v.0 as usize].sources {
            stack.push((src, s));
        }
    }
    let mut checked = vec![None; k.values.len()];
    let mut sites = Vec::new();
    for (i, d) in w.defs.iter().enumerate() {
        if let (Some(op), Some(s)) = (&d.checked, sink_of[i]) {
            checked[i] = Some(sites.len() as u32);
            sites.push(Site {
                op: op.clone(),
                sink: w.sinks[s].1.clone(),
            });
        }
    }
    (checked, sites)
}
