//! The per-kernel part of the AMDGPU code object metadata (`amdhsa.kernels`).

use super::msgpack::Map;
use super::CodeObjectError;
use rmpv::Value;

/// How an argument is passed (`.value_kind`).
///
/// ```
/// use flydsl_ir::codeobj::ValueKind;
/// assert_eq!(ValueKind::from_name("global_buffer"), ValueKind::GlobalBuffer);
/// assert_eq!(
///     ValueKind::from_name("hidden_block_count_x"),
///     ValueKind::Hidden("hidden_block_count_x".into())
/// );
/// assert!(ValueKind::from_name("hidden_queue_ptr").is_hidden());
/// assert_eq!(ValueKind::GlobalBuffer.name(), "global_buffer");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// Passed by value (`by_value`).
    #[default]
    ByValue,
    /// A pointer to global memory (`global_buffer`).
    GlobalBuffer,
    /// A pointer to dynamically allocated LDS (`dynamic_shared_pointer`).
    DynamicSharedPointer,
    /// An image / sampler / pipe / queue handle (`image`, `sampler`, `pipe`, `queue`).
    Handle(String),
    /// An argument the runtime fills in (`hidden_*`), with its full kind name.
    Hidden(String),
    /// A kind this parser does not know, kept verbatim.
    Other(String),
}

impl ValueKind {
    /// Classify a `.value_kind` string.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::ValueKind;
    /// assert_eq!(ValueKind::from_name("by_value"), ValueKind::ByValue);
    /// ```
    pub fn from_name(name: &str) -> ValueKind {
        match name {
            "by_value" => ValueKind::ByValue,
            "global_buffer" => ValueKind::GlobalBuffer,
            "dynamic_shared_pointer" => ValueKind::DynamicSharedPointer,
            "image" | "sampler" | "pipe" | "queue" => ValueKind::Handle(name.to_string()),
            h if h.starts_with("hidden_") => ValueKind::Hidden(h.to_string()),
            o => ValueKind::Other(o.to_string()),
        }
    }

    /// The metadata spelling of this kind.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::ValueKind;
    /// assert_eq!(ValueKind::ByValue.name(), "by_value");
    /// ```
    pub fn name(&self) -> &str {
        match self {
            ValueKind::ByValue => "by_value",
            ValueKind::GlobalBuffer => "global_buffer",
            ValueKind::DynamicSharedPointer => "dynamic_shared_pointer",
            ValueKind::Handle(s) | ValueKind::Hidden(s) | ValueKind::Other(s) => s,
        }
    }

    /// True for the arguments the runtime fills in (`hidden_*`).
    ///
    /// ```
    /// # use flydsl_ir::codeobj::ValueKind;
    /// assert!(!ValueKind::GlobalBuffer.is_hidden());
    /// ```
    pub fn is_hidden(&self) -> bool {
        matches!(self, ValueKind::Hidden(_))
    }
}

/// The address space of a pointer argument (`.address_space`).
///
/// ```
/// use flydsl_ir::codeobj::AddressSpace;
/// assert_eq!(AddressSpace::from_name("global"), AddressSpace::Global);
/// assert_eq!(AddressSpace::from_name("gds"), AddressSpace::Other("gds".into()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AddressSpace {
    /// `private` (scratch).
    Private,
    /// `global`.
    Global,
    /// `constant`.
    Constant,
    /// `local` (LDS).
    Local,
    /// `generic` (flat).
    Generic,
    /// `region` (GDS).
    Region,
    /// Anything else, verbatim.
    Other(String),
}

impl AddressSpace {
    /// Classify an `.address_space` string.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::AddressSpace;
    /// assert_eq!(AddressSpace::from_name("local"), AddressSpace::Local);
    /// ```
    pub fn from_name(name: &str) -> AddressSpace {
        match name {
            "private" => AddressSpace::Private,
            "global" => AddressSpace::Global,
            "constant" => AddressSpace::Constant,
            "local" => AddressSpace::Local,
            "generic" => AddressSpace::Generic,
            "region" => AddressSpace::Region,
            o => AddressSpace::Other(o.to_string()),
        }
    }
}

/// How a kernel accesses a pointer argument (`.access` / `.actual_access`).
///
/// ```
/// use flydsl_ir::codeobj::Access;
/// assert_eq!(Access::from_name("read_only"), Access::ReadOnly);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `read_only`.
    ReadOnly,
    /// `write_only`.
    WriteOnly,
    /// `read_write`.
    ReadWrite,
    /// Anything else, verbatim.
    Other(String),
}

impl Access {
    /// Classify an access string.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::Access;
    /// assert_eq!(Access::from_name("write_only"), Access::WriteOnly);
    /// ```
    pub fn from_name(name: &str) -> Access {
        match name {
            "read_only" => Access::ReadOnly,
            "write_only" => Access::WriteOnly,
            "read_write" => Access::ReadWrite,
            o => Access::Other(o.to_string()),
        }
    }
}

/// One kernel argument (`amdhsa.kernels[].args[]`).
///
/// ```
/// use flydsl_ir::codeobj::{KernelArg, ValueKind};
/// let a = KernelArg { name: Some("x".into()), offset: 0, size: 8,
///                     value_kind: ValueKind::GlobalBuffer, ..Default::default() };
/// assert!(!a.value_kind.is_hidden());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelArg {
    /// `.name`, absent for hidden arguments and unnamed IR arguments.
    pub name: Option<String>,
    /// `.offset` in the kernarg segment, bytes.
    pub offset: u32,
    /// `.size`, bytes.
    pub size: u32,
    /// `.value_kind`.
    pub value_kind: ValueKind,
    /// `.address_space` of a pointer argument.
    pub address_space: Option<AddressSpace>,
    /// `.access` as declared by the source language.
    pub access: Option<Access>,
    /// `.actual_access` as found by the compiler.
    pub actual_access: Option<Access>,
}

/// One kernel's metadata (`amdhsa.kernels[]`).
///
/// ```
/// use flydsl_ir::codeobj::KernelMeta;
/// let k = KernelMeta { name: "k".into(), symbol: "k.kd".into(), vgpr_count: 32,
///                      wavefront_size: 64, max_flat_workgroup_size: 256, ..Default::default() };
/// assert_eq!(k.waves_per_workgroup(), 4);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelMeta {
    /// `.name`: the source-level kernel name.
    pub name: String,
    /// `.symbol`: the kernel descriptor symbol (`name.kd`).
    pub symbol: String,
    /// `.kernarg_segment_size`, bytes (explicit and hidden arguments).
    pub kernarg_segment_size: u32,
    /// `.kernarg_segment_align`, bytes.
    pub kernarg_segment_align: u32,
    /// `.group_segment_fixed_size`: static LDS, bytes.
    pub group_segment_fixed_size: u32,
    /// `.private_segment_fixed_size`: scratch per work-item, bytes.
    pub private_segment_fixed_size: u32,
    /// `.vgpr_count`: VGPRs per work-item. On gfx90a+ (gfx942, gfx950), whose accumulation
    /// VGPRs follow the architectural ones in one file, LLVM writes their total here
    /// (`TotalNumVgprs` = architectural rounded up to 4, plus `.agpr_count`); see
    /// [`KernelMeta::arch_vgprs`].
    pub vgpr_count: u32,
    /// `.agpr_count`: accumulation VGPRs (gfx90a+), when present.
    pub agpr_count: Option<u32>,
    /// `.sgpr_count`.
    pub sgpr_count: u32,
    /// `.vgpr_spill_count`, when present.
    pub vgpr_spill_count: Option<u32>,
    /// `.sgpr_spill_count`, when present.
    pub sgpr_spill_count: Option<u32>,
    /// `.wavefront_size`: 32 or 64.
    pub wavefront_size: u32,
    /// `.max_flat_workgroup_size`.
    pub max_flat_workgroup_size: u32,
    /// `.uses_dynamic_stack` (false when absent).
    pub uses_dynamic_stack: bool,
    /// `.args` in order: explicit ones first, then hidden ones.
    pub args: Vec<KernelArg>,
    /// Size in bytes of the kernel's machine code (its `STT_FUNC` symbol), when the symbol
    /// table has it.
    pub code_size: Option<u64>,
}

impl KernelMeta {
    /// Architectural VGPRs (rounded up to 4 when AGPRs follow them): `.vgpr_count` less
    /// `.agpr_count` (the two counts [`crate::codeobj::occupancy`] takes).
    ///
    /// ```
    /// # use flydsl_ir::codeobj::KernelMeta;
    /// // llc: NumVgprs 203, NumAgprs 128, TotalNumVgprs 332 (= 204 + 128).
    /// let k = KernelMeta { vgpr_count: 332, agpr_count: Some(128), ..Default::default() };
    /// assert_eq!(k.arch_vgprs(), 204);
    /// let k = KernelMeta { vgpr_count: 60, agpr_count: None, ..Default::default() };
    /// assert_eq!(k.arch_vgprs(), 60);
    /// ```
    pub fn arch_vgprs(&self) -> u32 {
        self.vgpr_count.saturating_sub(self.agpr_count.unwrap_or(0))
    }
    /// Waves in the largest workgroup: `ceil(max_flat_workgroup_size / wavefront_size)`
    /// (at least 1).
    ///
    /// ```
    /// # use flydsl_ir::codeobj::KernelMeta;
    /// let k = KernelMeta { wavefront_size: 32, max_flat_workgroup_size: 100, ..Default::default() };
    /// assert_eq!(k.waves_per_workgroup(), 4);
    /// ```
    pub fn waves_per_workgroup(&self) -> u32 {
        self.max_flat_workgroup_size
            .div_ceil(self.wavefront_size.max(1))
            .max(1)
    }

    /// True if the kernel spills registers or uses scratch or a dynamic stack.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::KernelMeta;
    /// let k = KernelMeta { vgpr_spill_count: Some(2), ..Default::default() };
    /// assert!(k.uses_scratch());
    /// ```
    pub fn uses_scratch(&self) -> bool {
        self.private_segment_fixed_size > 0
            || self.uses_dynamic_stack
            || self.vgpr_spill_count.unwrap_or(0) > 0
            || self.sgpr_spill_count.unwrap_or(0) > 0
    }

    /// The kernel with metadata name `name` in a list.
    ///
    /// ```
    /// # use flydsl_ir::codeobj::KernelMeta;
    /// let ks = vec![KernelMeta { name: "a".into(), ..Default::default() }];
    /// assert!(KernelMeta::find(&ks, "a").is_some());
    /// assert!(KernelMeta::find(&ks, "b").is_none());
    /// ```
    pub fn find<'a>(kernels: &'a [KernelMeta], name: &str) -> Option<&'a KernelMeta> {
        kernels.iter().find(|k| k.name == name)
    }
}

/// The decoded top level of the metadata note.
pub(crate) struct Metadata {
    pub version: Option<(u32, u32)>,
    pub target: Option<String>,
    pub kernels: Vec<KernelMeta>,
}

/// Decode the `NT_AMDGPU_METADATA` msgpack map.
pub(crate) fn parse_metadata(root: &Value) -> Result<Metadata, CodeObjectError> {
    let top = Map::new(root, "metadata")?;
    let version = match top.opt_array("amdhsa.version")? {
        None => None,
        Some(v) => {
            let num = |i: usize| -> Result<u32, CodeObjectError> {
                v.get(i)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        top.error(
                            "amdhsa.version",
                            format!("expected [major, minor] integers, found {} items", v.len()),
                        )
                    })
            };
            Some((num(0)?, num(1)?))
        }
    };
    let target = top.opt_str("amdhsa.target")?.map(str::to_string);
    let kernels = match top.opt_array("amdhsa.kernels")? {
        None => Vec::new(),
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, k)| parse_kernel(i, k))
            .collect::<Result<_, _>>()?,
    };
    Ok(Metadata {
        version,
        target,
        kernels,
    })
}

fn parse_kernel(index: usize, value: &Value) -> Result<KernelMeta, CodeObjectError> {
    // Name the kernel in errors as soon as its name is known.
    let probe = Map::new(value, format!("amdhsa.kernels[{index}]"))?;
    let at = match probe.get(".name").and_then(Value::as_str) {
        Some(n) => format!("amdhsa.kernels[{index}] ({n})"),
        None => probe.at().to_string(),
    };
    let m = Map::new(value, at)?;
    let args = match m.opt_array(".args")? {
        None => Vec::new(),
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, a)| parse_arg(&m.field_at(&format!(".args[{i}]")), a))
            .collect::<Result<_, _>>()?,
    };
    Ok(KernelMeta {
        name: m.str(".name")?.to_string(),
        symbol: m.str(".symbol")?.to_string(),
        kernarg_segment_size: m.u32(".kernarg_segment_size")?,
        kernarg_segment_align: m.u32(".kernarg_segment_align")?,
        group_segment_fixed_size: m.u32(".group_segment_fixed_size")?,
        private_segment_fixed_size: m.u32(".private_segment_fixed_size")?,
        vgpr_count: m.u32(".vgpr_count")?,
        agpr_count: m.opt_u32(".agpr_count")?,
        sgpr_count: m.u32(".sgpr_count")?,
        vgpr_spill_count: m.opt_u32(".vgpr_spill_count")?,
        sgpr_spill_count: m.opt_u32(".sgpr_spill_count")?,
        wavefront_size: m.u32(".wavefront_size")?,
        max_flat_workgroup_size: m.u32(".max_flat_workgroup_size")?,
        uses_dynamic_stack: m.opt_bool(".uses_dynamic_stack")?.unwrap_or(false),
        args,
        code_size: None,
    })
}

fn parse_arg(at: &str, value: &Value) -> Result<KernelArg, CodeObjectError> {
    let m = Map::new(value, at)?;
    let kind_name = m.str(".value_kind")?;
    let arg = KernelArg {
        name: m.opt_str(".name")?.map(str::to_string),
        offset: m.u32(".offset")?,
        size: m.u32(".size")?,
        value_kind: ValueKind::from_name(kind_name),
        address_space: m.opt_str(".address_space")?.map(AddressSpace::from_name),
        access: m.opt_str(".access")?.map(Access::from_name),
        actual_access: m.opt_str(".actual_access")?.map(Access::from_name),
    };
    if arg.offset.checked_add(arg.size).is_none() {
        return Err(m.error(
            ".size",
            format!("offset {} + size {} overflows", arg.offset, arg.size),
        ));
    }
    Ok(arg)
}
