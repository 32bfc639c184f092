//! Global tensors: a row-major matrix with run-time extents, and its tiles.

use crate::context::target;
use crate::index::Idx;
use crate::mem::{Rsrc, Tensor};
use crate::val::{c_i32, select, Val};
use flydsl_ir::ScalarType::I64;

/// A row-major `rows x cols` matrix in global memory (run-time i32 extents, row stride
/// `cols`): the engine is the tensor's pointer, read through a buffer resource on AMD.
#[derive(Clone, Copy, Debug)]
pub struct GTensor {
    t: Tensor,
    rows: Val,
    cols: Val,
    ld: Val,
}

/// Where a tile's elements are read from and written to.
#[derive(Clone, Copy, Debug)]
enum Engine {
    /// A plain pointer (NVIDIA): guarded accesses.
    Ptr(Tensor),
    /// An AMD buffer resource over the in-bounds rows and its element count (i32):
    /// guarded accesses use an index past the end, which reads 0 and drops stores.
    Buf(Rsrc, Val),
}

/// A `shape.0 x shape.1` tile of a [`GTensor`] (from [`GTensor::local_tile`]). Accesses
/// are predicated on the tile's in-bounds part: out-of-range loads give 0, out-of-range
/// stores are dropped. A vector access must lie wholly inside or wholly outside the
/// columns (columns a multiple of the vector width, vectors aligned to it).
#[derive(Clone, Copy, Debug)]
pub struct GTile {
    engine: Engine,
    /// Column offset of the tile inside the row panel the engine starts at (i32).
    col0: Val,
    ld: Val,
    rows_left: Val,
    cols_left: Val,
    shape: (i64, i64),
}

impl GTensor {
    /// A row-major `rows x cols` view of `t` (i32 extents; `t` holds at least
    /// `rows * cols` elements).
    ///
    /// ```
    /// use flydsl_dsl::*;
    /// use flydsl_dsl::tile::GTensor;
    /// use flydsl_dsl::ir::{ScalarType::{F32, I32}, Target};
    /// for t in [Target::Gfx942, Target::Sm90] {
    ///     KernelBuilder::new("k", t, 64).build(|k| {
    ///         let x = k.tensor_mut("x", F32);
    ///         let (m, n) = (k.scalar("m", I32), k.scalar("n", I32));
    ///         let tile = GTensor::new(x, m, n).local_tile((16, 4), (block_id_x(), c_i32(0)));
    ///         tile.store(thread_id_x() / 4, thread_id_x() % 4, c_f32(1.0)); // guarded
    ///     }).unwrap();
    /// }
    /// ```
    pub fn new(t: Tensor, rows: Val, cols: Val) -> GTensor {
        GTensor {
            t,
            rows,
            cols,
            ld: cols,
        }
    }
    /// A `rows x cols` matrix whose rows start `ld` elements apart (`ld >= cols`, i32): one
    /// head of a `[seq, heads, dim]` tensor is `strided(t.offset(h * dim), seq, dim, heads *
    /// dim)`. Columns past `cols` are outside the matrix (loads read 0, stores are dropped).
    ///
    /// ```
    /// use flydsl_dsl::*;
    /// use flydsl_dsl::tile::GTensor;
    /// use flydsl_dsl::ir::{ScalarType::{F32, I32}, Target};
    /// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
    ///     let x = k.tensor("x", F32);
    ///     let (m, n) = (k.scalar("m", I32), k.scalar("n", I32));
    ///     let g = GTensor::strided(x, m, n, n * 4);
    ///     let _ = g.local_tile((16, 4), (block_id_x(), c_i32(0))).load(0.into(), 1.into(), 1);
    /// }).unwrap();
    /// ```
    pub fn strided(t: Tensor, rows: Val, cols: Val, ld: Val) -> GTensor {
        GTensor { t, rows, cols, ld }
    }
    /// The element type.
    pub fn elem(&self) -> flydsl_ir::ScalarType {
        self.t.elem()
    }
    /// Tile `(ti, tj)` of shape `shape` (CuTe's `local_tile`): rows `ti * shape.0 ..`,
    /// columns `tj * shape.1 ..` (run-time i32 tile indices). The pointer moves to the
    /// tile's first row in i64, so only `shape.0 * cols` (offsets inside the tile's rows)
    /// must stay below 2^31; the caller's host code checks that bound.
    pub fn local_tile(&self, shape: (i64, i64), (ti, tj): (Val, Val)) -> GTile {
        let row0 = ti * shape.0 as i32;
        let col0 = tj * shape.1 as i32;
        let base = self.t.offset(row0.cast(I64) * self.ld.cast(I64));
        let rows_left = self.rows - row0;
        let engine = if target().is_amd() {
            let in_rows = rows_left.min(shape.0 as i32).max(0);
            let num = in_rows * self.ld;
            Engine::Buf(base.rsrc_n(num.cast(I64)), num)
        } else {
            Engine::Ptr(base)
        };
        GTile {
            engine,
            col0,
            ld: self.ld,
            rows_left,
            cols_left: self.cols - col0,
            shape,
        }
    }
}

impl GTile {
    /// `(rows, cols)` of the tile.
    pub fn shape(&self) -> (i64, i64) {
        self.shape
    }
    /// Whether element `(r, c)` of the tile is inside the matrix (i1).
    pub fn in_bounds(&self, r: Idx, c: Idx) -> Val {
        r.val().lt(self.rows_left) & c.val().lt(self.cols_left)
    }
    fn index(&self, r: Idx, c: Idx) -> Val {
        r.val() * self.ld + (self.col0 + c.val())
    }
    /// `n` elements at `(r, c ..)`: zeros when outside the matrix.
    pub fn load(&self, r: Idx, c: Idx, n: u32) -> Val {
        let ok = self.in_bounds(r, c);
        let i = self.index(r, c);
        match self.engine {
            Engine::Buf(rs, num) => rs.load_vec(select(ok, i, num), n, align(rs.elem(), n)),
            Engine::Ptr(t) => {
                // Read a valid element (the tile's first) when out of range, then zero it.
                let v = t.load_vec(select(ok, i, c_i32(0)), n, align(t.elem(), n));
                let z = crate::val::splat(zero_of(v.elem()), n);
                select(ok, v, z)
            }
        }
    }
    /// The source of an sm_90 `cp.async` of `n` elements at `(r, c ..)`: the tensor pointer,
    /// the element index and the bytes to read (i32). Outside the matrix the index is 0 and
    /// the byte count 0 (the copy zero-fills and reads nothing); a vector that straddles the
    /// last column reads only its in-range part. `None` on AMD (buffer-resource tiles).
    pub(crate) fn async_src(&self, r: Idx, c: Idx, n: u32) -> Option<(Val, Val, Val)> {
        let Engine::Ptr(t) = self.engine else {
            return None;
        };
        let ok = self.in_bounds(r, c);
        let es = t.elem().size_bytes() as i32;
        let bytes = (self.cols_left - c.val()).min(c_i32(n as i32)) * es;
        let i = select(ok, self.index(r, c), c_i32(0));
        Some((t.ptr(), i, select(ok, bytes, c_i32(0))))
    }
    /// The source of an AMD direct-to-LDS load at `(r, c ..)`: the tile's buffer resource
    /// and the element index, past the resource's end outside the matrix (the load then
    /// reads zeros). `None` on NVIDIA (pointer tiles).
    pub(crate) fn direct_src(&self, r: Idx, c: Idx) -> Option<(Rsrc, Val)> {
        let Engine::Buf(rs, num) = self.engine else {
            return None;
        };
        let ok = self.in_bounds(r, c);
        Some((rs, select(ok, self.index(r, c), num)))
    }
    /// Store `v` (scalar or vector) at `(r, c ..)`; dropped outside the matrix.
    pub fn store(&self, r: impl Into<Idx>, c: impl Into<Idx>, v: Val) {
        let (r, c) = (r.into(), c.into());
        let ok = self.in_bounds(r, c);
        let i = self.index(r, c);
        match self.engine {
            Engine::Buf(rs, num) => {
                rs.store_aligned(select(ok, i, num), v, align(v.elem(), v.lanes()), false)
            }
            Engine::Ptr(t) => crate::control::if_(ok, || {
                t.store_aligned(i, v, align(v.elem(), v.lanes()), false)
            }),
        }
    }
}

/// The alignment of an `n`-element vector access (its size when a power of two).
pub(crate) fn align(e: flydsl_ir::ScalarType, n: u32) -> u32 {
    let b = e.size_bytes() * n;
    if b.is_power_of_two() {
        b.min(16)
    } else {
        e.size_bytes()
    }
}

fn zero_of(e: flydsl_ir::ScalarType) -> Val {
    use flydsl_ir::{Const, Type};
    let c = if e.is_float() {
        Const::Float(0.0)
    } else {
        Const::Int(0)
    };
    crate::val::cnst(Type::s(e), c)
}

impl From<i64> for Idx {
    fn from(v: i64) -> Self {
        Idx::Lit(v)
    }
}

impl From<i32> for Idx {
    fn from(v: i32) -> Self {
        Idx::Lit(v as i64)
    }
}
