//! The GPU targets and their machine facts.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A GPU target the generator can build for and the Sim can execute.
///
/// ```
/// use flydsl_ir::Target;
/// let t: Target = "gfx1201".parse().unwrap();
/// assert_eq!(t.wave_size(), 32);
/// assert!("gfx9000".parse::<Target>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    /// CDNA3 (MI300X), wave64, 64 KiB LDS.
    Gfx942,
    /// CDNA4 (MI350X/MI355X), wave64, 160 KiB LDS.
    Gfx950,
    /// RDNA4, wave32, 64 KiB LDS.
    Gfx1201,
    /// gfx12.5, wave32, 320 KiB LDS.
    Gfx1250,
    /// NVIDIA Hopper (H100/H200), warp32.
    Sm90,
}

impl Target {
    /// Every target, in a fixed order.
    pub const ALL: [Target; 5] = [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
        Target::Sm90,
    ];

    /// The name used in features, env vars and `-mcpu` (`gfx942`, `sm_90` is named `sm90`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Gfx942 => "gfx942",
            Target::Gfx950 => "gfx950",
            Target::Gfx1201 => "gfx1201",
            Target::Gfx1250 => "gfx1250",
            Target::Sm90 => "sm90",
        }
    }
    /// The `-mcpu` value for `llc`. NVIDIA builds `sm_90a`: wgmma and setmaxnreg exist only
    /// there, and such code loads on H100/H200 (compute capability 9.0) alone; other sm_90
    /// parts do not exist.
    pub fn mcpu(self) -> &'static str {
        match self {
            Target::Sm90 => "sm_90a",
            t => t.name(),
        }
    }
    /// The `-mattr` value for `llc` (empty for none): NVIDIA emits PTX ISA 8.4, the first
    /// with fp8 `mma.sync` on sm_90 (CUDA 12.4 drivers and later load it).
    ///
    /// ```
    /// use flydsl_ir::Target;
    /// assert_eq!(Target::Sm90.llc_mattr(), "+ptx84");
    /// assert_eq!(Target::Gfx942.llc_mattr(), "");
    /// ```
    pub fn llc_mattr(self) -> &'static str {
        match self {
            Target::Sm90 => "+ptx84",
            _ => "",
        }
    }
    /// What identifies this target's code generation in cache keys: the name, plus the
    /// `-mcpu`/`-mattr` choice where it is not the name alone.
    ///
    /// ```
    /// use flydsl_ir::Target;
    /// assert_eq!(Target::Gfx950.codegen_id(), "gfx950");
    /// assert_eq!(Target::Sm90.codegen_id(), "sm90|sm_90a|+ptx84");
    /// ```
    pub fn codegen_id(self) -> String {
        if self.llc_mattr().is_empty() && self.mcpu() == self.name() {
            self.name().to_string()
        } else {
            format!("{}|{}|{}", self.name(), self.mcpu(), self.llc_mattr())
        }
    }
    /// The PTX `.target` architecture NVIDIA code for this target is built for and checked
    /// against (`None` for AMD targets): `sm_90a`, the architecture-specific Hopper target
    /// that `wgmma` and `setmaxnreg` need (it loads on H100/H200 only).
    ///
    /// ```
    /// use flydsl_ir::Target;
    /// assert_eq!(Target::Sm90.ptx_target(), Some("sm_90a"));
    /// assert_eq!(Target::Gfx942.ptx_target(), None);
    /// ```
    pub fn ptx_target(self) -> Option<&'static str> {
        match self {
            Target::Sm90 => Some("sm_90a"),
            _ => None,
        }
    }
    /// The LLVM target triple.
    pub fn triple(self) -> &'static str {
        if self.is_amd() {
            "amdgcn-amd-amdhsa"
        } else {
            "nvptx64-nvidia-cuda"
        }
    }
    /// True for the AMDGPU targets.
    pub fn is_amd(self) -> bool {
        !matches!(self, Target::Sm90)
    }
    /// Threads per wave / warp.
    pub fn wave_size(self) -> u32 {
        match self {
            Target::Gfx942 | Target::Gfx950 => 64,
            _ => 32,
        }
    }
    /// Largest static LDS / shared allocation per workgroup, in bytes.
    pub fn max_lds_bytes(self) -> u32 {
        match self {
            Target::Gfx942 | Target::Gfx1201 => 65536,
            Target::Gfx950 => 163840,
            Target::Gfx1250 => 327680,
            // 48 KiB static; more needs dynamic shared memory with an opt-in.
            Target::Sm90 => 49152,
        }
    }
    /// The most LDS one workgroup may use, static and dynamic together: the static limit on
    /// AMD; on sm_90 227 KiB, which a kernel reaches only with dynamic shared memory (the
    /// runtime opts in past 48 KiB).
    ///
    /// ```
    /// use flydsl_ir::Target;
    /// assert_eq!(Target::Gfx942.max_total_lds_bytes(), Target::Gfx942.max_lds_bytes());
    /// assert_eq!(Target::Sm90.max_total_lds_bytes(), 232448);
    /// ```
    pub fn max_total_lds_bytes(self) -> u32 {
        match self {
            Target::Sm90 => 232448,
            t => t.max_lds_bytes(),
        }
    }
    /// Ticks per second of the constant-rate counter `llvm.readsteadycounter` reads on this
    /// target (the unit of [`OpKind::FlagWait`](crate::OpKind::FlagWait)'s timeout): NVIDIA's
    /// `%globaltimer` counts nanoseconds; AMD's `s_memrealtime` (gfx9) and the `REALTIME`
    /// message (gfx12) count at 100 MHz. The Sim counts host time at the same rate.
    ///
    /// ```
    /// use flydsl_ir::Target;
    /// assert_eq!(Target::Sm90.steady_counter_hz(), 1_000_000_000);
    /// assert_eq!(Target::Gfx942.steady_counter_hz(), 100_000_000);
    /// ```
    pub fn steady_counter_hz(self) -> u64 {
        match self {
            Target::Sm90 => 1_000_000_000,
            _ => 100_000_000,
        }
    }
    /// Largest workgroup size.
    pub fn max_threads_per_block(self) -> u32 {
        1024
    }
    /// The fp8 E4M3 format the hardware's matrix and convert instructions read.
    pub fn native_fp8_e4m3(self) -> crate::ScalarType {
        match self {
            Target::Gfx942 => crate::ScalarType::F8E4M3FNUZ,
            _ => crate::ScalarType::F8E4M3FN,
        }
    }
    /// The cargo feature that selects this target.
    pub fn feature(self) -> &'static str {
        self.name()
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown target name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown GPU target `{0}`: expected one of gfx942, gfx950, gfx1201, gfx1250, sm90")]
pub struct UnknownTarget(pub String);

impl FromStr for Target {
    type Err = UnknownTarget;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let base = s.trim().split(':').next().unwrap_or("");
        Ok(match base {
            "gfx942" => Target::Gfx942,
            "gfx950" => Target::Gfx950,
            "gfx1201" => Target::Gfx1201,
            "gfx1250" => Target::Gfx1250,
            "sm90" | "sm_90" | "sm_90a" => Target::Sm90,
            _ => return Err(UnknownTarget(s.to_string())),
        })
    }
}
