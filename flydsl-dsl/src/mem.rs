//! Memory: global tensors, AMD buffer resources and LDS arrays.

use crate::val::{c_i32, emit, emit0, Operand, Val};
use flydsl_ir::{MemFlags, OpKind, ScalarType, Type};

#[track_caller]
fn index(i: impl Into<Operand>) -> Val {
    match i.into() {
        Operand::V(v) => v,
        o => o.to_val(Type::s(ScalarType::I32)),
    }
}

fn flags(ty: Type, align: u32, nontemporal: bool) -> MemFlags {
    let natural = ty.elem().map(|e| e.size_bytes()).unwrap_or(1);
    MemFlags {
        align: align.max(natural),
        nontemporal,
        keep_l2: false,
    }
}

/// The pointer `i` elements (i32 or i64) past `p`.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::F32};
/// KernelBuilder::new("k", Target::Sm90, 32).build(|k| {
///     let lds = k.lds("buf", F32, 64);
///     let p = ptr_offset(lds.ptr(), thread_id_x() * 2);
///     assert_eq!(p.ty(), lds.ptr().ty());
/// }).unwrap();
/// ```
#[track_caller]
pub fn ptr_offset(p: Val, i: impl Into<Operand>) -> Val {
    emit(OpKind::PtrAdd(p.id(), index(i).id()), p.ty())
}

/// `n` elements at `ptr[i]` (the shared body of every pointer load).
#[track_caller]
fn ptr_load(ptr: Val, i: impl Into<Operand>, n: u32, align: u32) -> Val {
    let ty = Type::vec(ptr.elem(), n);
    let index = index(i);
    emit(
        OpKind::Load {
            ptr: ptr.id(),
            index: index.id(),
            flags: flags(ty, align, false),
        },
        ty,
    )
}

/// Store `v` at `ptr[i]` (the shared body of every pointer store).
#[track_caller]
fn ptr_store(ptr: Val, i: impl Into<Operand>, v: Val, align: u32, nontemporal: bool) {
    let index = index(i);
    emit0(OpKind::Store {
        ptr: ptr.id(),
        index: index.id(),
        value: v.id(),
        flags: flags(v.ty(), align, nontemporal),
    })
}

/// Atomic add at `ptr[i]`, returning the previous value.
#[track_caller]
fn ptr_atomic_add(ptr: Val, i: impl Into<Operand>, v: Val) -> Val {
    let index = index(i);
    emit(
        OpKind::AtomicAdd {
            ptr: ptr.id(),
            index: index.id(),
            value: v.id(),
        },
        v.ty(),
    )
}

/// A global tensor parameter: a pointer and its element count.
#[derive(Clone, Copy, Debug)]
pub struct Tensor {
    ptr: Val,
    len: Val,
}

impl Tensor {
    pub(crate) fn new(ptr: Val, len: Val) -> Self {
        Tensor { ptr, len }
    }
    /// The element type.
    pub fn elem(&self) -> ScalarType {
        self.ptr.elem()
    }
    /// The base pointer.
    pub fn ptr(&self) -> Val {
        self.ptr
    }
    /// The element count (i64), as passed by the launcher.
    pub fn len(&self) -> Val {
        self.len
    }
    /// Load element `i` (i32 or i64 index).
    #[track_caller]
    pub fn load(&self, i: impl Into<Operand>) -> Val {
        self.load_vec(i, 1, 0)
    }
    /// Load `n` consecutive elements starting at element `i`, assuming `align` bytes.
    #[track_caller]
    pub fn load_vec(&self, i: impl Into<Operand>, n: u32, align: u32) -> Val {
        ptr_load(self.ptr, i, n, align)
    }
    /// Store `v` (scalar or vector) at element `i`.
    #[track_caller]
    pub fn store(&self, i: impl Into<Operand>, v: Val) {
        self.store_aligned(i, v, 0, false)
    }
    /// Store with an alignment and non-temporal hint.
    #[track_caller]
    pub fn store_aligned(&self, i: impl Into<Operand>, v: Val, align: u32, nontemporal: bool) {
        ptr_store(self.ptr, i, v, align, nontemporal)
    }
    /// Atomic add at element `i` (f32 or i32); returns the previous value.
    #[track_caller]
    pub fn atomic_add(&self, i: impl Into<Operand>, v: Val) -> Val {
        ptr_atomic_add(self.ptr, i, v)
    }
    /// Release store of the `i32` flag `v` at element `i` at system scope
    /// ([`OpKind::FlagStore`]): this thread's earlier writes are visible to any agent whose
    /// [`flag_wait`](Self::flag_wait) sees `v`.
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::{I32, I64}};
    /// KernelBuilder::new("k", Target::Sm90, 32).build(|k| {
    ///     let flags = k.tensor_mut("flags", I32);
    ///     let timeout = k.scalar("timeout", I64);
    ///     flags.flag_store(thread_id_x(), c_i32(1));
    ///     let seen = flags.flag_wait(thread_id_x() + 32, c_i32(1), timeout);
    ///     if_(!seen, || flags.store(c_i32(64), c_i32(-1)));
    /// }).unwrap();
    /// ```
    #[track_caller]
    pub fn flag_store(&self, i: impl Into<Operand>, v: impl Into<Operand>) {
        let index = index(i);
        let v = v.into().to_val(Type::s(ScalarType::I32));
        emit0(OpKind::FlagStore {
            ptr: self.ptr.id(),
            index: index.id(),
            value: v.id(),
        })
    }
    /// Wait until the `i32` at element `i` equals `expect`, with system-scope acquire polls,
    /// for at most `timeout` (`i64`) ticks of the target's steady counter
    /// ([`OpKind::FlagWait`]); returns an `i1`, true when the value was seen.
    #[track_caller]
    pub fn flag_wait(
        &self,
        i: impl Into<Operand>,
        expect: impl Into<Operand>,
        timeout: impl Into<Operand>,
    ) -> Val {
        let index = index(i);
        let expect = expect.into().to_val(Type::s(ScalarType::I32));
        let timeout = timeout.into().to_val(Type::s(ScalarType::I64));
        emit(
            OpKind::FlagWait {
                ptr: self.ptr.id(),
                index: index.id(),
                expect: expect.id(),
                timeout: timeout.id(),
            },
            Type::s(ScalarType::I1),
        )
    }
    /// `cond ? a : b` for two tensors of one element type (pointer and length), e.g. the
    /// buffer of one of several peers chosen per lane.
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::F32};
    /// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
    ///     let (a, b) = (k.tensor_mut("a", F32), k.tensor_mut("b", F32));
    ///     Tensor::select(thread_id_x().lt(32), &a, &b).store(thread_id_x(), c_f32(1.0));
    /// }).unwrap();
    /// ```
    #[track_caller]
    pub fn select(cond: Val, a: &Tensor, b: &Tensor) -> Tensor {
        Tensor {
            ptr: crate::val::select(cond, a.ptr, b.ptr),
            len: crate::val::select(cond, a.len, b.len),
        }
    }
    /// A view starting `offset` elements further (the length is not adjusted).
    #[track_caller]
    pub fn offset(&self, offset: impl Into<Operand>) -> Tensor {
        let o = index(offset);
        Tensor {
            ptr: emit(OpKind::PtrAdd(self.ptr.id(), o.id()), self.ptr.ty()),
            len: self.len,
        }
    }
    /// A buffer resource over the whole tensor: out-of-range loads read 0, stores are dropped.
    #[track_caller]
    pub fn rsrc(&self) -> Rsrc {
        self.rsrc_n(self.len)
    }
    /// A buffer resource over the first `n` (i64) elements.
    #[track_caller]
    pub fn rsrc_n(&self, n: Val) -> Rsrc {
        let v = emit(
            OpKind::MakeRsrc {
                ptr: self.ptr.id(),
                num_elems: n.id(),
            },
            Type::BufferRsrc(self.elem()),
        );
        Rsrc { v }
    }
}

/// The values `loads(keep)` gives, where `keep` follows the run-time condition `keep_l2`:
/// `loads(true)` should read with the keep-in-L2 hint ([`Rsrc::load_vec_keep_l2`]) and
/// `loads(false)` the same values without it. On NVIDIA this is a uniform branch between the
/// two; AMD lowering ignores the hint, so there it is `loads(false)` alone, with no branch.
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::ir::{ScalarType, Target};
/// for t in [Target::Sm90, Target::Gfx942] {
///     let k = KernelBuilder::new("maybe_hinted", t, 64)
///         .build(|k| {
///             let x = k.tensor("x", ScalarType::F32);
///             let y = k.tensor_mut("y", ScalarType::F32);
///             let keep = k.scalar("keep", ScalarType::I32).ne(0);
///             let i = thread_id_x() * 4;
///             let r = x.rsrc();
///             let v = keep_l2_if(keep, |hint| {
///                 vec![if hint { r.load_vec_keep_l2(i, 4, 16) } else { r.load_vec(i, 4, 16) }]
///             });
///             y.rsrc().store_aligned(i, v[0], 16, false);
///         })
///         .unwrap();
///     assert_eq!(format!("{:?}", k.body).contains("keep_l2: true"), t == Target::Sm90);
/// }
/// ```
#[track_caller]
pub fn keep_l2_if(keep_l2: Val, loads: impl Fn(bool) -> Vec<Val>) -> Vec<Val> {
    if crate::context::target().is_amd() {
        loads(false)
    } else {
        crate::control::if_else(keep_l2, || loads(true), || loads(false))
    }
}

/// An AMD buffer resource (emulated with bounds checks elsewhere).
#[derive(Clone, Copy, Debug)]
pub struct Rsrc {
    v: Val,
}

impl Rsrc {
    /// The element type.
    pub fn elem(&self) -> ScalarType {
        self.v.elem()
    }
    /// Load `n` elements at element index `i` (i32); out-of-range reads 0.
    #[track_caller]
    pub fn load_vec(&self, i: impl Into<Operand>, n: u32, align: u32) -> Val {
        self.load_with(i, n, flags(Type::vec(self.elem(), n), align, false))
    }
    /// [`Rsrc::load_vec`] with the keep-in-L2 hint ([`MemFlags::keep_l2`]): for data read
    /// now that should outlast other lines in the L2 (what it gains is measured in
    /// `bench/h200-table.md`, keep-in-L2 A/B). Same result as `load_vec`.
    ///
    /// ```
    /// use flydsl_dsl::*;
    /// use flydsl_dsl::ir::{ScalarType, Target};
    /// let k = KernelBuilder::new("hinted", Target::Sm90, 64)
    ///     .build(|k| {
    ///         let x = k.tensor("x", ScalarType::F32);
    ///         let y = k.tensor_mut("y", ScalarType::F32);
    ///         let i = thread_id_x() * 4;
    ///         let v = x.rsrc().load_vec_keep_l2(i, 4, 16);
    ///         y.rsrc().store_aligned(i, v, 16, false);
    ///     })
    ///     .unwrap();
    /// assert!(format!("{:?}", k.body).contains("keep_l2: true"));
    /// ```
    #[track_caller]
    pub fn load_vec_keep_l2(&self, i: impl Into<Operand>, n: u32, align: u32) -> Val {
        let f = MemFlags {
            keep_l2: true,
            ..flags(Type::vec(self.elem(), n), align, false)
        };
        self.load_with(i, n, f)
    }
    #[track_caller]
    fn load_with(&self, i: impl Into<Operand>, n: u32, flags: MemFlags) -> Val {
        let ty = Type::vec(self.elem(), n);
        let index = index(i);
        emit(
            OpKind::BufferLoad {
                rsrc: self.v.id(),
                index: index.id(),
                flags,
            },
            ty,
        )
    }
    /// Load one element.
    #[track_caller]
    pub fn load(&self, i: impl Into<Operand>) -> Val {
        self.load_vec(i, 1, 0)
    }
    /// The resource value.
    pub(crate) fn val(&self) -> Val {
        self.v
    }
    /// Store `v` at element index `i`; out-of-range stores are dropped.
    #[track_caller]
    pub fn store(&self, i: impl Into<Operand>, v: Val) {
        self.store_aligned(i, v, 0, false)
    }
    /// Store with alignment and non-temporal hints.
    #[track_caller]
    pub fn store_aligned(&self, i: impl Into<Operand>, v: Val, align: u32, nontemporal: bool) {
        let index = index(i);
        emit0(OpKind::BufferStore {
            rsrc: self.v.id(),
            index: index.id(),
            value: v.id(),
            flags: flags(v.ty(), align, nontemporal),
        })
    }
}

/// The element accessors of an LDS array type with a `ptr: Val` field (static or dynamic).
macro_rules! lds_accessors {
    () => {
        /// The LDS pointer to element 0.
        pub fn ptr(&self) -> Val {
            self.ptr
        }
        /// The LDS pointer to element `i` (i32).
        #[track_caller]
        pub fn ptr_at(&self, i: impl Into<Operand>) -> Val {
            ptr_offset(self.ptr, i)
        }
        /// Load `n` elements at element `i`.
        #[track_caller]
        pub fn load_vec(&self, i: impl Into<Operand>, n: u32, align: u32) -> Val {
            ptr_load(self.ptr, i, n, align)
        }
        /// Load one element.
        #[track_caller]
        pub fn load(&self, i: impl Into<Operand>) -> Val {
            self.load_vec(i, 1, 0)
        }
        /// Store at element `i`.
        #[track_caller]
        pub fn store(&self, i: impl Into<Operand>, v: Val) {
            ptr_store(self.ptr, i, v, 0, false)
        }
        /// Store at element `i`, assuming `align` bytes.
        pub fn store_aligned(&self, i: impl Into<Operand>, v: Val, align: u32) {
            ptr_store(self.ptr, i, v, align, false)
        }
        /// The element type.
        pub fn elem(&self) -> ScalarType {
            self.ptr.elem()
        }
        /// Atomic add at element `i`.
        #[track_caller]
        pub fn atomic_add(&self, i: impl Into<Operand>, v: Val) -> Val {
            ptr_atomic_add(self.ptr, i, v)
        }
        /// The pointer to element 0.
        #[allow(dead_code)]
        pub(crate) fn base_ptr(&self) -> Val {
            self.ptr
        }
    };
}

/// A kernel's dynamic LDS region (from `KernelDef::lds_dynamic`): arrays are laid out in the
/// order [`DynLds::array`] is called, each at the previous end rounded up to 16 bytes, the
/// rule of `flydsl_ir::dynamic_lds_layout`, which the host uses to size the launch.
#[derive(Clone, Copy, Debug)]
pub struct DynLds {
    /// Byte offset of the end of the last array (i32).
    end: Val,
}

impl DynLds {
    #[track_caller]
    pub(crate) fn new() -> Self {
        DynLds { end: c_i32(0) }
    }
    /// The next array: `len` (a run-time i32) elements of `elem`.
    #[track_caller]
    pub fn array(&mut self, elem: ScalarType, len: impl Into<Operand>) -> DynLdsArray {
        let align = flydsl_ir::DYNAMIC_LDS_ALIGN as i32;
        let start = ((self.end + (align - 1)) / align) * align;
        let len = index(len);
        let ptr = emit(
            OpKind::DynLdsBase(start.id()),
            Type::Ptr(flydsl_ir::AddrSpace::Shared, elem),
        );
        self.end = start + len * elem.size_bytes() as i32;
        DynLdsArray { ptr, len }
    }
    /// The next array, starting on an `align`-byte boundary of the LDS window (a power of
    /// two; TMA and wgmma 128-byte swizzles need 1024). The region's own start is only
    /// 16-byte aligned, so this can skip up to `align - 16` bytes: launch with that much
    /// slack beyond the arrays' sizes.
    #[track_caller]
    pub fn array_aligned(
        &mut self,
        elem: ScalarType,
        len: impl Into<Operand>,
        align: u32,
    ) -> DynLdsArray {
        let a = align.max(flydsl_ir::DYNAMIC_LDS_ALIGN) as i32;
        let base_ptr = emit(
            OpKind::DynLdsBase(c_i32(0).id()),
            Type::Ptr(flydsl_ir::AddrSpace::Shared, ScalarType::I8),
        );
        let base = crate::nv::lds_addr(base_ptr);
        let start = ((base + self.end + (a - 1)) / a) * a - base;
        let len = index(len);
        let ptr = emit(
            OpKind::DynLdsBase(start.id()),
            Type::Ptr(flydsl_ir::AddrSpace::Shared, elem),
        );
        self.end = start + len * elem.size_bytes() as i32;
        DynLdsArray { ptr, len }
    }
    /// Bytes the arrays so far occupy (i32): the least dynamic LDS a launch must give.
    pub fn bytes(&self) -> Val {
        self.end
    }
}

/// An LDS array with a run-time length, inside a kernel's [`DynLds`] region.
#[derive(Clone, Copy, Debug)]
pub struct DynLdsArray {
    ptr: Val,
    len: Val,
}

impl DynLdsArray {
    /// Element count (i32).
    pub fn len(&self) -> Val {
        self.len
    }
    lds_accessors!();
}

/// A static LDS (shared memory) array.
#[derive(Clone, Copy, Debug)]
pub struct Lds {
    ptr: Val,
    len: u32,
}

impl Lds {
    pub(crate) fn new(ptr: Val, len: u32) -> Self {
        Lds { ptr, len }
    }
    /// Element count.
    pub fn len(&self) -> u32 {
        self.len
    }
    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    lds_accessors!();
}
