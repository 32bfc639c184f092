//! The function emitter: SSA temporaries, basic blocks, the scoped map from IR values to LLVM
//! operands, intrinsic declarations, metadata and the final module assembly; and
//! [`TargetHooks`], everything the lowering asks of a vendor's target, implemented once per
//! vendor (`amdgpu`, `nvptx`) and chosen once per kernel by [`crate::lower`].

use super::{ty, LowerError};
use flydsl_ir::{
    AddrSpace, Kernel, MemFlags, ParamKind, ScalarType, ShuffleMode, Special, Target, Type, UnOp,
    ValueId,
};
use std::collections::{BTreeSet, HashMap};

/// What the lowering asks of a vendor's target. Every op whose lowering differs by vendor
/// goes through one of these methods; nothing else in the lowering branches on the vendor.
pub(crate) trait TargetHooks: Sync {
    /// Module header: target triple and datalayout.
    fn module_header(&self) -> String;
    /// The `define` keyword and return type of a kernel function.
    fn define_kernel(&self) -> &'static str;
    /// The kernel function's attributes (empty for none).
    fn fn_attributes(&self, k: &Kernel) -> String;
    /// Module-level metadata of the kernel whose symbol is `sym`.
    fn module_metadata(&self, f: &mut Func, sym: &str) -> String;
    /// A thread-geometry query.
    fn special(&self, f: &mut Func, s: Special) -> Result<String, LowerError>;
    /// The hardware fast form of `op` on an f32 operand.
    fn fast_f32(&self, f: &mut Func, op: UnOp, x: &str) -> String;
    /// A workgroup barrier with workgroup-scope memory ordering.
    fn barrier(&self, f: &mut Func);
    /// A cross-lane shuffle.
    fn shuffle(
        &self,
        f: &mut Func,
        mode: ShuffleMode,
        v: ValueId,
        lane: ValueId,
    ) -> Result<String, LowerError>;
    /// The value of the first active lane.
    fn read_first_lane(&self, f: &mut Func, v: ValueId) -> Result<String, LowerError>;
    /// A global load of `bytes` bytes (LLVM memory type `mt`) with the keep-in-L2 hint, or
    /// `None` where the target lowers the hint as a plain load.
    fn load_keep_l2(&self, f: &mut Func, addr: &str, mt: &str, bytes: u32) -> Option<String>;
    /// Sync scope and trailing metadata of an atomic read-modify-write on address space `a`.
    fn atomic_scope(
        &self,
        f: &mut Func,
        a: AddrSpace,
    ) -> Result<(&'static str, String), LowerError>;
    /// The LLVM type of a buffer resource.
    fn rsrc_type(&self) -> &'static str;
    /// A buffer resource over `n` elements of `e` from pointer `p` (IR result type `rt`).
    ///
    /// `uniform`: the pointer and count are provably wave-uniform
    /// ([`flydsl_ir::uniform`]), so the resource may be forced into scalar registers.
    fn make_rsrc(
        &self,
        f: &mut Func,
        p: &str,
        n: &str,
        e: ScalarType,
        rt: Type,
        uniform: bool,
    ) -> String;
    /// A buffer load of type `rt` at element `idx` of resource `r`; out-of-range reads zero.
    fn buffer_load(
        &self,
        f: &mut Func,
        r: &str,
        idx: &str,
        e: ScalarType,
        flags: MemFlags,
        rt: Type,
    ) -> Result<String, LowerError>;
    /// A buffer store of `v` (type `vt`) at element `idx` of `r`; out-of-range is dropped.
    #[allow(clippy::too_many_arguments)]
    fn buffer_store(
        &self,
        f: &mut Func,
        r: &str,
        idx: &str,
        e: ScalarType,
        flags: MemFlags,
        v: &str,
        vt: Type,
    ) -> Result<(), LowerError>;
}

/// State of the one kernel function being emitted.
pub(crate) struct Func<'k> {
    /// The kernel being lowered.
    pub k: &'k Kernel,
    /// Its target.
    pub target: Target,
    /// The target's vendor hooks.
    hooks: &'static dyn TargetHooks,
    /// Body text (instructions and labels).
    body: String,
    /// Next temporary number.
    tmp: u32,
    /// Next label number.
    labels: u32,
    /// IR value -> LLVM operand text.
    vals: HashMap<ValueId, String>,
    /// Values defined per open region, to forget them when the region closes.
    scopes: Vec<Vec<ValueId>>,
    /// `declare` lines of the intrinsics used.
    decls: BTreeSet<String>,
    /// Metadata node bodies; node `!i` is `md[i]`.
    md: Vec<String>,
    /// Label of the block instructions are currently appended to.
    pub cur_block: String,
    /// Pre-order index of the op being lowered (for errors).
    pub op_index: usize,
    /// Short name of the op being lowered (for errors).
    pub op_name: String,
    /// Instructions to emit right after the entry label (parameter fix-ups).
    entry_fixups: Vec<String>,
    /// Which values are provably wave-uniform ([`flydsl_ir::uniform::uniform_values`]).
    uniform: Vec<bool>,
}

impl<'k> Func<'k> {
    /// A fresh emitter for `k`, lowering vendor-specific ops through `hooks`.
    pub fn new(k: &'k Kernel, hooks: &'static dyn TargetHooks) -> Func<'k> {
        Func {
            k,
            target: k.target,
            hooks,
            body: String::new(),
            tmp: 0,
            labels: 0,
            vals: HashMap::new(),
            scopes: vec![Vec::new()],
            decls: BTreeSet::new(),
            md: Vec::new(),
            cur_block: String::new(),
            op_index: 0,
            op_name: "kernel".into(),
            entry_fixups: Vec::new(),
            uniform: flydsl_ir::uniform::uniform_values(k),
        }
    }

    /// Whether `v` is provably the same in every lane of a wave.
    pub fn is_uniform(&self, v: ValueId) -> bool {
        self.uniform.get(v.0 as usize).copied().unwrap_or(false)
    }

    /// The target's vendor hooks.
    pub fn hooks(&self) -> &'static dyn TargetHooks {
        self.hooks
    }

    /// Element type and lane count of a scalar or vector value type.
    pub fn shape(&self, t: Type) -> Result<(ScalarType, u32), LowerError> {
        match t {
            Type::Scalar(s) | Type::Vector(s, _) => Ok((s, t.lanes())),
            _ => Err(self.err(format!("expected a scalar or vector value, got {t}"))),
        }
    }

    /// An error about the current op.
    pub fn err(&self, reason: impl Into<String>) -> LowerError {
        LowerError {
            kernel: self.k.name.clone(),
            target: self.target.to_string(),
            op: self.op_index,
            op_name: self.op_name.clone(),
            reason: reason.into(),
            loc: self.k.src_locs.op(self.op_index),
        }
    }

    /// The IR type of a value (checked: a bad id is an error, not a panic).
    pub fn ty(&self, v: ValueId) -> Result<Type, LowerError> {
        self.k
            .values
            .get(v.0 as usize)
            .copied()
            .ok_or_else(|| self.err(format!("value %{} has no type entry", v.0)))
    }

    /// LLVM spelling of an IR type on this target.
    pub fn lty(&self, t: Type) -> String {
        ty::llvm_type(t, self.hooks.rsrc_type())
    }

    /// Append one line to the body.
    pub fn emit(&mut self, line: String) {
        self.body.push_str("  ");
        self.body.push_str(&line);
        self.body.push('\n');
    }

    /// Emit `%tN = rhs` and return `%tN`.
    pub fn inst(&mut self, rhs: impl AsRef<str>) -> String {
        let name = format!("%t{}", self.tmp);
        self.tmp += 1;
        self.emit(format!("{name} = {}", rhs.as_ref()));
        name
    }

    /// A fresh, unique block label (without `%`).
    pub fn new_label(&mut self, hint: &str) -> String {
        self.labels += 1;
        format!("{hint}{}", self.labels)
    }

    /// Start block `label`; instructions now go there.
    pub fn start_block(&mut self, label: &str) {
        self.body.push_str(label);
        self.body.push_str(":\n");
        self.cur_block = label.to_string();
    }

    /// Current length of the body text (a position for [`Func::insert_at`]).
    pub fn mark(&self) -> usize {
        self.body.len()
    }

    /// Insert instruction lines at a position returned by [`Func::mark`].
    pub fn insert_at(&mut self, pos: usize, lines: &[String]) {
        let text: String = lines.iter().map(|l| format!("  {l}\n")).collect();
        self.body.insert_str(pos, &text);
    }

    /// Unconditional branch.
    pub fn br(&mut self, label: &str) {
        self.emit(format!("br label %{label}"));
    }

    /// Conditional branch on an `i1` operand.
    pub fn cond_br(&mut self, cond: &str, t: &str, e: &str) {
        self.emit(format!("br i1 {cond}, label %{t}, label %{e}"));
    }

    /// Call an intrinsic (declared automatically) and return the result operand (or an
    /// empty string for `void`).
    pub fn call(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) -> String {
        let tys: Vec<&str> = args.iter().map(|(t, _)| *t).collect();
        self.decls
            .insert(format!("declare {ret} @{name}({})", tys.join(", ")));
        let a: Vec<String> = args.iter().map(|(t, v)| format!("{t} {v}")).collect();
        let c = format!("call {ret} @{name}({})", a.join(", "));
        if ret == "void" {
            self.emit(c);
            String::new()
        } else {
            self.inst(c)
        }
    }

    /// Add a metadata node and return its reference (`!N`).
    pub fn metadata(&mut self, body: &str) -> String {
        if let Some(i) = self.md.iter().position(|m| m == body) {
            return format!("!{i}");
        }
        self.md.push(body.to_string());
        format!("!{}", self.md.len() - 1)
    }

    /// Open a region scope.
    pub fn push_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    /// Close a region scope: its values are no longer visible.
    pub fn pop_scope(&mut self) {
        if let Some(s) = self.scopes.pop() {
            for v in s {
                self.vals.remove(&v);
            }
        }
    }

    /// Bind an IR value to an LLVM operand in the current scope.
    pub fn def(&mut self, v: ValueId, operand: String) {
        self.vals.insert(v, operand);
        if let Some(s) = self.scopes.last_mut() {
            s.push(v);
        }
    }

    /// The LLVM operand of an IR value visible here.
    pub fn get(&self, v: ValueId) -> Result<String, LowerError> {
        self.vals.get(&v).cloned().ok_or_else(|| {
            self.err(format!(
                "value %{} is not visible here (it is defined inside a region that does not \
                 enclose this use)",
                v.0
            ))
        })
    }

    /// Operand and type of a value.
    pub fn get_t(&self, v: ValueId) -> Result<(String, Type), LowerError> {
        Ok((self.get(v)?, self.ty(v)?))
    }

    /// Bind the kernel's parameter values to function arguments; returns the argument list
    /// text of the definition, in `kernarg_layout()` order.
    pub fn bind_params(&mut self) -> Result<Vec<String>, LowerError> {
        let layout = self.k.kernarg_layout();
        let mut args = Vec::new();
        self.op_name = "params".into();
        for (i, slot) in layout.slots.iter().enumerate() {
            let param = self
                .k
                .params
                .get(slot.param)
                .ok_or_else(|| self.err("bad slot"))?;
            let vals = self
                .k
                .param_values
                .get(slot.param)
                .ok_or_else(|| self.err(format!("parameter `{}` has no values", param.name)))?;
            let name = ty::local_name(&slot.name, i);
            match param.kind {
                ParamKind::Tensor { elem, writable } => {
                    if vals.len() != 2 {
                        return Err(self.err(format!(
                            "tensor parameter `{}` needs (pointer, extent) values, has {}",
                            param.name,
                            vals.len()
                        )));
                    }
                    let (v, want) = if slot.is_pointer {
                        (vals[0], Type::Ptr(flydsl_ir::AddrSpace::Global, elem))
                    } else {
                        (vals[1], Type::Scalar(ScalarType::I64))
                    };
                    if self.ty(v)? != want {
                        return Err(self.err(format!(
                            "value %{} of parameter `{}` has type {}, expected {want}",
                            v.0,
                            param.name,
                            self.ty(v)?
                        )));
                    }
                    if slot.is_pointer {
                        let ro = if writable { "" } else { " readonly" };
                        args.push(format!("ptr addrspace(1) noalias{ro} {name}"));
                    } else {
                        args.push(format!("i64 {name}"));
                    }
                    self.def(v, name);
                }
                ParamKind::Scalar(s) => {
                    let [v] = vals[..] else {
                        return Err(self.err(format!(
                            "scalar parameter `{}` needs one value, has {}",
                            param.name,
                            vals.len()
                        )));
                    };
                    if self.ty(v)? != Type::Scalar(s) {
                        return Err(self.err(format!(
                            "value %{} of parameter `{}` has type {}, expected {s}",
                            v.0,
                            param.name,
                            self.ty(v)?
                        )));
                    }
                    if s == ScalarType::I1 {
                        args.push(format!("i8 {name}"));
                        let b = format!("%arg{i}.bool");
                        self.entry_fixups
                            .push(format!("{b} = trunc i8 {name} to i1"));
                        self.def(v, b);
                    } else {
                        args.push(format!("{} {name}", self.lty(Type::Scalar(s))));
                        self.def(v, name);
                    }
                }
            }
        }
        Ok(args)
    }

    /// `x` of type `t` as the i32 the cross-lane intrinsics move: f32 bit-cast, i32 as is.
    pub(crate) fn bitcast_to_i32(&mut self, x: &str, t: Type) -> String {
        if t == Type::Scalar(ScalarType::F32) {
            self.inst(format!("bitcast float {x} to i32"))
        } else {
            x.to_string()
        }
    }

    /// The inverse of [`Func::bitcast_to_i32`]: the i32 `r` back as a value of type `t`.
    pub(crate) fn bitcast_from_i32(&mut self, r: String, t: Type) -> String {
        if t == Type::Scalar(ScalarType::F32) {
            self.inst(format!("bitcast i32 {r} to float"))
        } else {
            r
        }
    }

    /// Emit the parameter fix-ups (call right after starting the entry block).
    pub fn emit_entry_fixups(&mut self) {
        for l in std::mem::take(&mut self.entry_fixups) {
            self.emit(l);
        }
    }

    /// The LDS / shared block global, when the kernel has LDS arrays.
    fn lds_global(&self) -> Option<String> {
        if self.k.lds.is_empty() {
            return None;
        }
        let bytes = self.k.lds_bytes().max(1);
        let align = self.k.lds.iter().map(|a| a.align).fold(16, u32::max);
        let align = if align.is_power_of_two() { align } else { 16 };
        Some(format!(
            "@{} = internal addrspace(3) global [{bytes} x i8] undef, align {align}",
            ty::LDS_SYMBOL
        ))
    }

    /// Assemble the complete module text.
    pub fn finish_module(mut self, params: &[String]) -> String {
        let name = ty::symbol(&self.k.name);
        let mut out = String::new();
        let hooks = self.hooks;
        let attrs = hooks.fn_attributes(self.k);
        let fn_md = hooks.module_metadata(&mut self, &name);
        let (header, define) = (hooks.module_header(), hooks.define_kernel());
        out.push_str(&format!("; kernel `{}` for {}\n", self.k.name, self.target));
        out.push_str(&header);
        out.push('\n');
        if let Some(g) = self.lds_global() {
            out.push_str(&g);
            out.push_str("\n\n");
        }
        if self.k.dynamic_lds.is_some() {
            out.push_str(&format!(
                "@{} = external addrspace(3) global [0 x i8], align {}\n\n",
                ty::DYN_LDS_SYMBOL,
                flydsl_ir::DYNAMIC_LDS_ALIGN
            ));
        }
        let attr_ref = if attrs.is_empty() { "" } else { " #0" };
        out.push_str(&format!(
            "{define} {name}({}){attr_ref} {{\n",
            params.join(", ")
        ));
        out.push_str(&self.body);
        out.push_str("}\n\n");
        for d in &self.decls {
            out.push_str(d);
            out.push('\n');
        }
        if !attrs.is_empty() {
            out.push_str(&format!("\nattributes #0 = {{ {attrs} }}\n"));
        }
        out.push('\n');
        out.push_str(&fn_md);
        for (i, m) in self.md.iter().enumerate() {
            out.push_str(&format!("!{i} = {m}\n"));
        }
        out
    }
}
