//! Hand-built kernels for the runtime's tests, and helpers to wrap them in static variant
//! tables.

#![allow(dead_code)]

use flydsl_ir::*;
use flydsl_rt::{KernelVariant, KernelVariants};

/// A tiny IR builder: values get types, ops get appended to the current block.
pub struct Builder {
    pub k: Kernel,
    blocks: Vec<Block>,
}

impl Builder {
    pub fn new(name: &str, target: Target, max_threads: u32) -> Builder {
        let mut k = Kernel::empty(name, target);
        k.attrs.max_threads = max_threads;
        Builder {
            k,
            blocks: vec![Block::default()],
        }
    }

    fn value(&mut self, t: Type) -> ValueId {
        self.k.values.push(t);
        ValueId(self.k.values.len() as u32 - 1)
    }

    /// Add a tensor parameter; returns (pointer, length) values.
    pub fn tensor(&mut self, name: &str, elem: ScalarType, writable: bool) -> (ValueId, ValueId) {
        let p = self.value(Type::Ptr(AddrSpace::Global, elem));
        let n = self.value(Type::s(ScalarType::I64));
        self.k.params.push(Param {
            name: name.into(),
            kind: ParamKind::Tensor { elem, writable },
        });
        self.k.param_values.push(vec![p, n]);
        (p, n)
    }

    /// Add a scalar parameter.
    pub fn scalar(&mut self, name: &str, t: ScalarType) -> ValueId {
        let v = self.value(Type::s(t));
        self.k.params.push(Param {
            name: name.into(),
            kind: ParamKind::Scalar(t),
        });
        self.k.param_values.push(vec![v]);
        v
    }

    pub fn op(&mut self, kind: OpKind, result: Option<Type>) -> ValueId {
        let results = match result {
            Some(t) => vec![self.value(t)],
            None => vec![],
        };
        let r = results.first().copied().unwrap_or(ValueId(u32::MAX));
        self.blocks
            .last_mut()
            .unwrap()
            .ops
            .push(Op { results, kind });
        r
    }

    pub fn i32(&mut self, kind: OpKind) -> ValueId {
        self.op(kind, Some(Type::s(ScalarType::I32)))
    }

    /// The global thread index `blockIdx.x * blockDim.x + threadIdx.x` as i64.
    pub fn global_index(&mut self) -> ValueId {
        let tid = self.i32(OpKind::Special(Special::ThreadId(Dim::X)));
        let bid = self.i32(OpKind::Special(Special::BlockId(Dim::X)));
        let bdim = self.i32(OpKind::Special(Special::BlockDim(Dim::X)));
        let base = self.i32(OpKind::Binary(BinOp::Mul, bid, bdim));
        let i = self.i32(OpKind::Binary(BinOp::Add, base, tid));
        self.op(
            OpKind::Cast(CastKind::Convert, i),
            Some(Type::s(ScalarType::I64)),
        )
    }

    /// Run `body` under `if cond` (no results).
    pub fn if_then(&mut self, cond: ValueId, body: impl FnOnce(&mut Builder)) {
        self.blocks.push(Block::default());
        body(self);
        let mut then_block = self.blocks.pop().unwrap();
        then_block.ops.push(Op {
            results: vec![],
            kind: OpKind::Yield(vec![]),
        });
        let else_block = Block {
            args: vec![],
            ops: vec![Op {
                results: vec![],
                kind: OpKind::Yield(vec![]),
            }],
        };
        self.op(
            OpKind::If {
                cond,
                then_block,
                else_block,
            },
            None,
        );
    }

    pub fn finish(mut self) -> Kernel {
        self.k.body = self.blocks.pop().unwrap();
        verify(&self.k).expect("hand-built test kernel verifies");
        self.k
    }
}

fn f32_mem() -> MemFlags {
    MemFlags {
        align: 4,
        nontemporal: false,
        keep_l2: false,
    }
}

/// `c[i] = a[i] + b[i]` for `i < c.len`, one element per thread (tail guarded).
pub fn vadd(target: Target, max_threads: u32) -> Kernel {
    let mut b = Builder::new("vadd", target, max_threads);
    let (pa, _) = b.tensor("a", ScalarType::F32, false);
    let (pb, _) = b.tensor("b", ScalarType::F32, false);
    let (pc, nc) = b.tensor("c", ScalarType::F32, true);
    let i = b.global_index();
    let cond = b.op(
        OpKind::Cmp(CmpPred::Lt, i, nc),
        Some(Type::s(ScalarType::I1)),
    );
    b.if_then(cond, |b| {
        let f = Type::s(ScalarType::F32);
        let va = b.op(
            OpKind::Load {
                ptr: pa,
                index: i,
                flags: f32_mem(),
            },
            Some(f),
        );
        let vb = b.op(
            OpKind::Load {
                ptr: pb,
                index: i,
                flags: f32_mem(),
            },
            Some(f),
        );
        let s = b.op(OpKind::Binary(BinOp::Add, va, vb), Some(f));
        b.op(
            OpKind::Store {
                ptr: pc,
                index: i,
                value: s,
                flags: f32_mem(),
            },
            None,
        );
    });
    b.finish()
}

/// `y[i] = alpha * x[i] + i` for `i < count` (scalars at offsets 32 and 36).
pub fn saxpy_iota(target: Target) -> Kernel {
    let mut b = Builder::new("saxpy_iota", target, 256);
    let (px, _) = b.tensor("x", ScalarType::F32, false);
    let (py, _) = b.tensor("y", ScalarType::F32, true);
    let alpha = b.scalar("alpha", ScalarType::F32);
    let count = b.scalar("count", ScalarType::I32);
    let i = b.global_index();
    let count64 = b.op(
        OpKind::Cast(CastKind::Convert, count),
        Some(Type::s(ScalarType::I64)),
    );
    let cond = b.op(
        OpKind::Cmp(CmpPred::Lt, i, count64),
        Some(Type::s(ScalarType::I1)),
    );
    b.if_then(cond, |b| {
        let f = Type::s(ScalarType::F32);
        let vx = b.op(
            OpKind::Load {
                ptr: px,
                index: i,
                flags: f32_mem(),
            },
            Some(f),
        );
        let fi = b.op(OpKind::Cast(CastKind::Convert, i), Some(f));
        let r = b.op(OpKind::Fma(alpha, vx, fi), Some(f));
        b.op(
            OpKind::Store {
                ptr: py,
                index: i,
                value: r,
                flags: f32_mem(),
            },
            None,
        );
    });
    b.finish()
}

/// A kernel that does nothing, with no parameters.
pub fn noop(target: Target) -> Kernel {
    Builder::new("noop", target, 1024).finish()
}

pub fn leak(bytes: Vec<u8>) -> &'static [u8] {
    Box::leak(bytes.into_boxed_slice())
}

/// A static variant table with one variant per kernel (IR embedded, code as given).
pub fn table(
    crate_name: &'static str,
    kernels: Vec<(Kernel, Option<&'static [u8]>)>,
) -> &'static KernelVariants {
    let name: &'static str = Box::leak(kernels[0].0.name.clone().into_boxed_str());
    let variants: Vec<KernelVariant> = kernels
        .into_iter()
        .map(|(k, code)| KernelVariant {
            target: k.target,
            code,
            ir: leak(to_bytes(&k)),
        })
        .collect();
    Box::leak(Box::new(KernelVariants {
        name,
        crate_name,
        variants: Box::leak(variants.into_boxed_slice()),
    }))
}
