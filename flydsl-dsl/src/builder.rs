//! [`KernelBuilder`] and [`KernelDef`]: declare a kernel's parameters and LDS, run its body
//! in a fresh build context, verify the result.

use crate::context::{pre_order, with, BuildError, State, CTX};
use crate::mem::{DynLds, Lds, Tensor};
use crate::val::{emit, Val};
use flydsl_ir::{
    Block, Kernel, KernelAttrs, LdsArray, OpKind, Param, ParamKind, ScalarType, Target, Type,
    ValueId,
};

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
                rotate_loops: false,
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
    /// Rotate the kernel's loops before AMD code generation (`KernelAttrs::rotate_loops`:
    /// for loops that carry matrix-atom accumulators).
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::Target;
    /// let k = KernelBuilder::new("k", Target::Gfx942, 256).rotate_loops(true).build(|_| {}).unwrap();
    /// assert!(k.attrs.rotate_loops);
    /// ```
    pub fn rotate_loops(mut self, on: bool) -> Self {
        self.attrs.rotate_loops = on;
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
                locs: vec![vec![]],
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
        let mut locs = st.locs;
        kernel.src_locs = pre_order(locs.pop().expect("root block locations"));
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
    #[track_caller]
    pub fn lds(&mut self, name: &str, elem: ScalarType, len: u32) -> Lds {
        self.lds_aligned(name, elem, len, 16)
    }
    /// A static LDS array starting on an `align`-byte boundary of the LDS window (a power of
    /// two >= 16; TMA and wgmma 128-byte swizzles need 1024).
    ///
    /// ```
    /// # use flydsl_dsl::*; use flydsl_dsl::ir::{Target, ScalarType::{F32, BF16}};
    /// let k = KernelBuilder::new("k", Target::Sm90, 128).build(|k| {
    ///     k.lds("a", F32, 3);
    ///     k.lds_aligned("tile", BF16, 4096, 1024);
    /// }).unwrap();
    /// assert_eq!(k.lds[1].offset, 1024);
    /// ```
    #[track_caller]
    pub fn lds_aligned(&mut self, name: &str, elem: ScalarType, len: u32, align: u32) -> Lds {
        let id = with(|s| {
            if !align.is_power_of_two() || align < 16 {
                s.fail(format!(
                    "LDS array `{name}`: alignment {align} is not a power of two >= 16"
                ));
            }
            let align = align.max(16).next_power_of_two();
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
    #[track_caller]
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
