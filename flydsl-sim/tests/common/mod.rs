//! A small test-only IR builder and host helpers.
#![allow(dead_code)]

use flydsl_ir::*;
use flydsl_sim::SimMemory;

/// Builds a kernel op by op; regions are built with closures.
pub struct B {
    pub k: Kernel,
    stack: Vec<Block>,
}

pub const I1: Type = Type::Scalar(ScalarType::I1);
pub const I32: Type = Type::Scalar(ScalarType::I32);
pub const I64: Type = Type::Scalar(ScalarType::I64);
pub const F32: Type = Type::Scalar(ScalarType::F32);

impl B {
    pub fn new(name: &str, target: Target) -> B {
        let mut k = Kernel::empty(name, target);
        k.attrs.max_threads = 1024;
        B {
            k,
            stack: vec![Block::default()],
        }
    }

    pub fn val(&mut self, t: Type) -> ValueId {
        self.k.values.push(t);
        ValueId(self.k.values.len() as u32 - 1)
    }

    pub fn tensor(&mut self, name: &str, elem: ScalarType) -> (ValueId, ValueId) {
        let p = self.val(Type::Ptr(AddrSpace::Global, elem));
        let n = self.val(I64);
        self.k.params.push(Param {
            name: name.into(),
            kind: ParamKind::Tensor {
                elem,
                writable: true,
            },
        });
        self.k.param_values.push(vec![p, n]);
        (p, n)
    }

    pub fn scalar(&mut self, name: &str, st: ScalarType) -> ValueId {
        let v = self.val(Type::Scalar(st));
        self.k.params.push(Param {
            name: name.into(),
            kind: ParamKind::Scalar(st),
        });
        self.k.param_values.push(vec![v]);
        v
    }

    pub fn lds(&mut self, name: &str, elem: ScalarType, len: u32) -> u32 {
        let offset = self.k.lds_bytes().next_multiple_of(16);
        self.k.lds.push(LdsArray {
            name: name.into(),
            elem,
            len,
            offset,
            align: 16,
        });
        self.k.lds.len() as u32 - 1
    }

    pub fn op(&mut self, kind: OpKind, ty: Type) -> ValueId {
        let r = self.val(ty);
        self.stack.last_mut().unwrap().ops.push(Op {
            results: vec![r],
            kind,
        });
        r
    }

    pub fn op0(&mut self, kind: OpKind) {
        self.stack.last_mut().unwrap().ops.push(Op {
            results: vec![],
            kind,
        });
    }

    pub fn ty(&self, v: ValueId) -> Type {
        self.k.ty(v)
    }

    pub fn ci(&mut self, v: i64, t: Type) -> ValueId {
        self.op(OpKind::Const(Const::Int(v)), t)
    }
    pub fn i32(&mut self, v: i32) -> ValueId {
        self.ci(v as i64, I32)
    }
    pub fn f32(&mut self, v: f32) -> ValueId {
        self.op(OpKind::Const(Const::Float(v as f64)), F32)
    }
    pub fn special(&mut self, s: Special) -> ValueId {
        self.op(OpKind::Special(s), I32)
    }
    pub fn tid(&mut self) -> ValueId {
        self.special(Special::ThreadId(Dim::X))
    }
    /// blockIdx.x * blockDim.x + threadIdx.x
    pub fn gid(&mut self) -> ValueId {
        let b = self.special(Special::BlockId(Dim::X));
        let d = self.special(Special::BlockDim(Dim::X));
        let t = self.tid();
        let m = self.bin(BinOp::Mul, b, d);
        self.bin(BinOp::Add, m, t)
    }
    pub fn bin(&mut self, op: BinOp, a: ValueId, b: ValueId) -> ValueId {
        let t = self.ty(a);
        self.op(OpKind::Binary(op, a, b), t)
    }
    pub fn un(&mut self, op: UnOp, a: ValueId) -> ValueId {
        let t = self.ty(a);
        self.op(OpKind::Unary(op, a), t)
    }
    pub fn cmp(&mut self, p: CmpPred, a: ValueId, b: ValueId) -> ValueId {
        let t = Type::vec(ScalarType::I1, self.ty(a).lanes());
        self.op(OpKind::Cmp(p, a, b), t)
    }
    pub fn cast(&mut self, kind: CastKind, a: ValueId, t: Type) -> ValueId {
        self.op(OpKind::Cast(kind, a), t)
    }
    pub fn select(&mut self, c: ValueId, a: ValueId, b: ValueId) -> ValueId {
        let t = self.ty(a);
        self.op(OpKind::Select(c, a, b), t)
    }
    pub fn load(&mut self, ptr: ValueId, index: ValueId, t: Type) -> ValueId {
        self.op(
            OpKind::Load {
                ptr,
                index,
                flags: MemFlags::default(),
            },
            t,
        )
    }
    pub fn store(&mut self, ptr: ValueId, index: ValueId, value: ValueId) {
        self.op0(OpKind::Store {
            ptr,
            index,
            value,
            flags: MemFlags::default(),
        })
    }
    pub fn lds_base(&mut self, id: u32) -> ValueId {
        let e = self.k.lds[id as usize].elem;
        self.op(OpKind::LdsBase(id), Type::Ptr(AddrSpace::Shared, e))
    }
    pub fn barrier(&mut self) {
        self.op0(OpKind::Barrier)
    }
    pub fn shuffle(&mut self, mode: ShuffleMode, v: ValueId, l: ValueId) -> ValueId {
        let t = self.ty(v);
        self.op(OpKind::Shuffle(mode, v, l), t)
    }

    fn region(&mut self, args: Vec<ValueId>, f: impl FnOnce(&mut B) -> Vec<ValueId>) -> Block {
        self.stack.push(Block { args, ops: vec![] });
        let ys = f(self);
        self.op0(OpKind::Yield(ys));
        self.stack.pop().unwrap()
    }

    pub fn if_(
        &mut self,
        cond: ValueId,
        tys: &[Type],
        then_f: impl FnOnce(&mut B) -> Vec<ValueId>,
        else_f: impl FnOnce(&mut B) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        let then_block = self.region(vec![], then_f);
        let else_block = self.region(vec![], else_f);
        let results: Vec<ValueId> = tys.iter().map(|&t| self.val(t)).collect();
        self.stack.last_mut().unwrap().ops.push(Op {
            results: results.clone(),
            kind: OpKind::If {
                cond,
                then_block,
                else_block,
            },
        });
        results
    }

    /// `if cond { f }` with no results.
    pub fn when(&mut self, cond: ValueId, f: impl FnOnce(&mut B)) {
        self.if_(
            cond,
            &[],
            |b| {
                f(b);
                vec![]
            },
            |_| vec![],
        );
    }

    pub fn for_(
        &mut self,
        lb: ValueId,
        ub: ValueId,
        step: ValueId,
        init: Vec<ValueId>,
        f: impl FnOnce(&mut B, ValueId, &[ValueId]) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        let iv = self.val(self.ty(lb));
        let carried: Vec<ValueId> = init
            .iter()
            .map(|&v| self.k.ty(v))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| self.val(t))
            .collect();
        let mut args = vec![iv];
        args.extend(&carried);
        let body = self.region(args, |b| f(b, iv, &carried));
        let results: Vec<ValueId> = init
            .iter()
            .map(|&v| self.k.ty(v))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| self.val(t))
            .collect();
        self.stack.last_mut().unwrap().ops.push(Op {
            results: results.clone(),
            kind: OpKind::For {
                lb,
                ub,
                step,
                init,
                body,
            },
        });
        results
    }

    pub fn finish(mut self) -> Kernel {
        self.k.body = self.stack.pop().unwrap();
        flydsl_ir::verify(&self.k).unwrap_or_else(|e| panic!("test kernel invalid: {e}"));
        self.k
    }
}

/// A kernel argument value for packing.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Tensor(u64, i64),
    I32(i32),
    I64(i64),
    F32(f32),
}

/// Pack arguments in parameter order using the kernel's kernarg layout.
pub fn pack(k: &Kernel, args: &[Arg]) -> Vec<u8> {
    let l = k.kernarg_layout();
    let mut buf = vec![0u8; l.size as usize];
    let mut put = |off: u32, b: &[u8]| buf[off as usize..off as usize + b.len()].copy_from_slice(b);
    let mut slots = l.slots.iter();
    for a in args {
        match *a {
            Arg::Tensor(p, n) => {
                put(slots.next().unwrap().offset, &p.to_le_bytes());
                put(slots.next().unwrap().offset, &n.to_le_bytes());
            }
            Arg::I32(v) => put(slots.next().unwrap().offset, &v.to_le_bytes()),
            Arg::I64(v) => put(slots.next().unwrap().offset, &v.to_le_bytes()),
            Arg::F32(v) => put(slots.next().unwrap().offset, &v.to_le_bytes()),
        }
    }
    buf
}

pub fn upload_f32(mem: &SimMemory, data: &[f32]) -> u64 {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    let a = mem.alloc(bytes.len() as u64).unwrap();
    mem.write(a, &bytes).unwrap();
    a
}

pub fn upload_u32(mem: &SimMemory, data: &[u32]) -> u64 {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    let a = mem.alloc(bytes.len() as u64).unwrap();
    mem.write(a, &bytes).unwrap();
    a
}

pub fn upload_bytes(mem: &SimMemory, data: &[u8]) -> u64 {
    let a = mem.alloc(data.len() as u64).unwrap();
    mem.write(a, data).unwrap();
    a
}

pub fn download_u32(mem: &SimMemory, addr: u64, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; n * 4];
    mem.read(addr, &mut b).unwrap();
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn download_f32(mem: &SimMemory, addr: u64, n: usize) -> Vec<f32> {
    download_u32(mem, addr, n)
        .into_iter()
        .map(f32::from_bits)
        .collect()
}

pub fn download_u16(mem: &SimMemory, addr: u64, n: usize) -> Vec<u16> {
    let mut b = vec![0u8; n * 2];
    mem.read(addr, &mut b).unwrap();
    b.chunks(2)
        .map(|c| u16::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A deterministic xorshift generator.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform integer in [lo, hi].
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}
