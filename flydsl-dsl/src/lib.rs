//! flydsl-dsl: the kernel-authoring API, Rust code that builds kernel IR.
//!
//! This is the one crate a kernel author reads. It holds the DSL (this module), the CuTe-style
//! layout algebra ([`layout`]) and the matrix-atom lane layouts ([`atoms`]); the kernel IR it
//! builds is [`ir`] (`flydsl-ir`). Lowering lives in `flydsl-codegen` and the build-script
//! machinery in `flydsl-build`.
//!
//! A kernel is written as a Rust closure that declares its parameters and then computes with
//! [`Val`]s. Compile-time loops are plain Rust loops; run-time loops and branches are
//! [`for_range`] and [`if_else`]. Ops are recorded into the kernel being built through a
//! thread-local context, so arithmetic reads like ordinary Rust.
//!
//! ```
//! use flydsl_dsl::*;
//! use flydsl_dsl::ir::{ScalarType::F32, Target};
//! let k = KernelBuilder::new("vadd", Target::Gfx942, 256)
//!     .build(|k| {
//!         let a = k.tensor("a", F32);
//!         let b = k.tensor("b", F32);
//!         let c = k.tensor_mut("c", F32);
//!         let n = k.scalar("n", flydsl_dsl::ir::ScalarType::I32);
//!         let i = block_id_x() * 256 + thread_id_x();
//!         if_(i.lt(n), || c.store(i, a.load(i) + b.load(i)));
//!     })
//!     .unwrap();
//! assert_eq!(k.params.len(), 4);
//! ```

pub use flydsl_ir as ir;

pub mod atoms;
mod control;
mod index;
pub mod layout;
mod mem;
mod val;
mod wave;

pub use control::{for_range, for_range_, if_, if_else};
pub use index::Idx;
pub use mem::{keep_l2_if, DynLds, DynLdsArray, Lds, Rsrc, Tensor};
pub use val::{
    block_dim_x, block_id, block_id_x, c_f32, c_i32, c_i64, cnst, grid_dim_x, lane_id, select,
    splat, thread_id, thread_id_x, vec_of, Operand, Val,
};
pub use wave::{
    barrier, block_reduce, mma, mma_scaled, read_first_lane, shuffle_down, shuffle_idx,
    shuffle_xor, wave_reduce, wave_reduce_max, wave_reduce_sum, wave_size,
};

use flydsl_ir::{
    Block, Kernel, KernelAttrs, LdsArray, Op, OpKind, Param, ParamKind, ScalarType, Target, Type,
    ValueId,
};
use std::cell::RefCell;

/// A kernel could not be built: the description or the IR it produced is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The IR failed verification.
    #[error(transparent)]
    Verify(#[from] flydsl_ir::VerifyError),
    /// The description itself is invalid (names the kernel and the reason).
    #[error("kernel `{kernel}` (target {target}): {reason}")]
    Invalid {
        /// Kernel name.
        kernel: String,
        /// Target.
        target: Target,
        /// What is wrong.
        reason: String,
    },
}

pub(crate) struct State {
    pub kernel: Kernel,
    pub blocks: Vec<Block>,
    pub error: Option<String>,
}

thread_local! {
    static CTX: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Run `f` with the active builder state. Panics only on misuse of the DSL outside
/// [`KernelBuilder::build`] (a programming error in a build script, not a user-input error).
pub(crate) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    CTX.with(|c| {
        let mut g = c.borrow_mut();
        let st = g
            .as_mut()
            .expect("flydsl DSL values can only be used inside KernelBuilder::build");
        f(st)
    })
}

impl State {
    pub fn new_value(&mut self, ty: Type) -> ValueId {
        let id = ValueId(self.kernel.values.len() as u32);
        self.kernel.values.push(ty);
        id
    }
    pub fn push(&mut self, kind: OpKind, result_tys: &[Type]) -> Vec<ValueId> {
        let results: Vec<ValueId> = result_tys.iter().map(|&t| self.new_value(t)).collect();
        let blk = self
            .blocks
            .last_mut()
            .expect("builder always has an open block");
        blk.ops.push(Op {
            results: results.clone(),
            kind,
        });
        results
    }
    pub fn fail(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(msg);
        }
    }
}

/// Emit one op with one result of type `ty`.
pub(crate) fn emit(kind: OpKind, ty: Type) -> Val {
    with(|s| Val::from_id(s.push(kind, &[ty])[0], ty))
}

/// Emit one op with no results.
pub(crate) fn emit0(kind: OpKind) {
    with(|s| {
        s.push(kind, &[]);
    })
}

/// The target of the kernel being built.
///
/// ```
/// # use flydsl_dsl::*; use flydsl_dsl::ir::Target;
/// KernelBuilder::new("k", Target::Gfx1201, 64).build(|_| assert_eq!(target(), Target::Gfx1201)).unwrap();
/// ```
pub fn target() -> Target {
    with(|s| s.kernel.target)
}

/// Builds one kernel for one target.
#[derive(Debug, Clone)]
pub struct KernelBuilder {
    name: String,
    target: Target,
    attrs: KernelAttrs,
}

/// Declares parameters and LDS of the kernel being built; passed to the body closure.
#[derive(Debug)]
pub struct KernelDef {
    _private: (),
}

impl KernelBuilder {
    /// A kernel `name` for `target`, launched with at most `max_threads` threads per block.
    pub fn new(name: &str, target: Target, max_threads: u32) -> Self {
        KernelBuilder {
            name: name.to_string(),
            target,
            attrs: KernelAttrs {
                max_threads,
                waves_per_eu: None,
                max_registers: None,
            },
        }
    }
    /// Set the AMD waves-per-EU occupancy hint.
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::Target;
    /// let k = KernelBuilder::new("k", Target::Gfx942, 256).waves_per_eu(Some(2)).build(|_| {}).unwrap();
    /// assert_eq!(k.attrs.waves_per_eu, Some(2));
    /// ```
    pub fn waves_per_eu(mut self, w: Option<u32>) -> Self {
        self.attrs.waves_per_eu = w;
        self
    }
    /// Set a register cap hint.
    pub fn max_registers(mut self, r: Option<u32>) -> Self {
        self.attrs.max_registers = r;
        self
    }
    /// Run the body closure and return the verified kernel.
    pub fn build(self, body: impl FnOnce(&mut KernelDef)) -> Result<Kernel, BuildError> {
        let mut kernel = Kernel::empty(&self.name, self.target);
        kernel.attrs = self.attrs;
        let prev = CTX.with(|c| {
            c.borrow_mut().replace(State {
                kernel,
                blocks: vec![Block::default()],
                error: None,
            })
        });
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            body(&mut KernelDef { _private: () })
        }));
        let st = CTX
            .with(|c| std::mem::replace(&mut *c.borrow_mut(), prev))
            .expect("builder state present");
        let invalid = |reason: String| BuildError::Invalid {
            kernel: self.name.clone(),
            target: self.target,
            reason,
        };
        if let Err(p) = result {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic in kernel description".into());
            return Err(invalid(msg));
        }
        if let Some(e) = st.error {
            return Err(invalid(e));
        }
        let mut kernel = st.kernel;
        let mut blocks = st.blocks;
        kernel.body = blocks.pop().expect("root block");
        flydsl_ir::verify(&kernel)?;
        Ok(kernel)
    }
}

impl KernelDef {
    fn param(&mut self, name: &str, kind: ParamKind) -> Vec<Val> {
        with(|s| {
            let tys: Vec<Type> = match kind {
                ParamKind::Tensor { elem, .. } => vec![
                    Type::Ptr(flydsl_ir::AddrSpace::Global, elem),
                    Type::s(ScalarType::I64),
                ],
                ParamKind::Scalar(t) => vec![Type::s(t)],
            };
            if s.kernel.params.iter().any(|p| p.name == name) {
                s.fail(format!("parameter `{name}` is declared twice"));
            }
            let ids: Vec<ValueId> = tys.iter().map(|&t| s.new_value(t)).collect();
            s.kernel.params.push(Param {
                name: name.to_string(),
                kind,
            });
            s.kernel.param_values.push(ids.clone());
            ids.iter()
                .zip(tys)
                .map(|(&i, t)| Val::from_id(i, t))
                .collect()
        })
    }
    /// A read-only global tensor parameter.
    pub fn tensor(&mut self, name: &str, elem: ScalarType) -> Tensor {
        let v = self.param(
            name,
            ParamKind::Tensor {
                elem,
                writable: false,
            },
        );
        Tensor::new(v[0], v[1])
    }
    /// A writable global tensor parameter.
    pub fn tensor_mut(&mut self, name: &str, elem: ScalarType) -> Tensor {
        let v = self.param(
            name,
            ParamKind::Tensor {
                elem,
                writable: true,
            },
        );
        Tensor::new(v[0], v[1])
    }
    /// A scalar parameter passed by value.
    pub fn scalar(&mut self, name: &str, ty: ScalarType) -> Val {
        self.param(name, ParamKind::Scalar(ty))[0]
    }
    /// A static LDS array of `len` elements, aligned to 16 bytes.
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::F32};
    /// let k = KernelBuilder::new("k", Target::Gfx942, 64).build(|k| { k.lds("red", F32, 64); }).unwrap();
    /// assert_eq!(k.lds_bytes(), 256);
    /// ```
    pub fn lds(&mut self, name: &str, elem: ScalarType, len: u32) -> Lds {
        let id = with(|s| {
            let align = 16;
            let offset = s.kernel.lds_bytes().next_multiple_of(align);
            s.kernel.lds.push(LdsArray {
                name: name.to_string(),
                elem,
                len,
                offset,
                align,
            });
            (s.kernel.lds.len() - 1) as u32
        });
        let ptr = emit(
            OpKind::LdsBase(id),
            Type::Ptr(flydsl_ir::AddrSpace::Shared, elem),
        );
        Lds::new(ptr, len)
    }
    /// The kernel's dynamic LDS region, sized per launch (`LaunchConfig::dynamic_lds_bytes`
    /// in flydsl-rt); carve arrays with run-time lengths from it with [`DynLds::array`]. A
    /// kernel has at most one region: a second call is a build error.
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::{F32, I32}};
    /// let k = KernelBuilder::new("k", Target::Sm90, 128)
    ///     .build(|k| {
    ///         let n = k.scalar("n", I32);
    ///         let mut region = k.lds_dynamic("smem");
    ///         let vals = region.array(F32, n); // n f32 at byte 0
    ///         let _flags = region.array(I32, 4); // 4 i32 at byte 4n rounded up to 16
    ///         vals.store(thread_id_x(), c_f32(1.0));
    ///     })
    ///     .unwrap();
    /// assert!(k.dynamic_lds.is_some());
    /// ```
    pub fn lds_dynamic(&mut self, name: &str) -> DynLds {
        with(|s| {
            if s.kernel.dynamic_lds.is_some() {
                s.fail(format!(
                    "the dynamic LDS region is declared twice (second name `{name}`); carve \
                     every run-time sized array from one region"
                ));
            }
            s.kernel.dynamic_lds = Some(flydsl_ir::DynamicLds {
                name: name.to_string(),
            });
        });
        DynLds::new()
    }
}
