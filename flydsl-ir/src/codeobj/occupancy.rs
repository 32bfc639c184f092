//! Occupancy (waves per SIMD) from register and LDS usage, following LLVM's AMDGPU model.

use crate::Target;

/// The per-target constants of the occupancy model.
///
/// | target | VGPR granule | VGPRs per SIMD | max waves | LDS per CU/WGP | workgroup slots |
/// |---|---|---|---|---|---|
/// | gfx942 | 8 | 512 | 8 | 64 KiB | 16 |
/// | gfx950 | 8 | 512 | 8 | 160 KiB | 16 |
/// | gfx1201 | 24 | 1536 | 16 | 128 KiB (WGP) | 32 |
/// | gfx1250 | 16 | 1024 | 16 | 320 KiB | 16 |
///
/// gfx1201's and gfx1250's figures (wave32) were fitted to the `; Occupancy:` remarks of
/// `llc-22` over a grid of VGPR and LDS sizes (see the crate's `codeobj_occupancy` test):
/// gfx1250 has 16-register granules out of 1024 (not gfx1201's 24 of 1536), gfx1201 shares
/// 128 KiB of LDS per work-group processor (a single workgroup may use at most 64 KiB), and
/// gfx1250 holds at most 16 multi-wave workgroups per CU.
///
/// ```
/// use flydsl_ir::{codeobj::OccupancyLimits, Target};
/// let l = OccupancyLimits::of(Target::Gfx942).unwrap();
/// assert_eq!((l.vgpr_granule, l.vgprs_per_simd, l.max_waves), (8, 512, 8));
/// assert!(OccupancyLimits::of(Target::Sm90).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OccupancyLimits {
    /// VGPRs are allocated in multiples of this.
    pub vgpr_granule: u32,
    /// VGPRs (arch + acc) per SIMD lane.
    pub vgprs_per_simd: u32,
    /// Most waves a SIMD can hold.
    pub max_waves: u32,
    /// LDS shared by the workgroups of one CU (WGP on gfx1201), bytes.
    pub lds_per_cu: u32,
    /// Largest LDS allocation of one workgroup, bytes.
    pub lds_per_workgroup: u32,
    /// SIMDs that the waves of one CU (WGP) are spread over.
    pub simds_per_cu: u32,
    /// Most multi-wave workgroups one CU holds at once (barrier slots).
    pub workgroup_slots: u32,
    /// Arch VGPRs are rounded up to 4 before AGPRs are added (unified register file).
    pub unified_agprs: bool,
}

impl OccupancyLimits {
    /// The constants for an AMD target; `None` for NVIDIA.
    ///
    /// ```
    /// use flydsl_ir::{codeobj::OccupancyLimits, Target};
    /// assert_eq!(OccupancyLimits::of(Target::Gfx1250).unwrap().vgpr_granule, 16);
    /// ```
    pub fn of(target: Target) -> Option<OccupancyLimits> {
        let cdna = |lds_kib: u32| OccupancyLimits {
            vgpr_granule: 8,
            vgprs_per_simd: 512,
            max_waves: 8,
            lds_per_cu: lds_kib * 1024,
            lds_per_workgroup: lds_kib * 1024,
            simds_per_cu: 4,
            workgroup_slots: 16,
            unified_agprs: true,
        };
        Some(match target {
            Target::Gfx942 => cdna(64),
            Target::Gfx950 => cdna(160),
            Target::Gfx1201 => OccupancyLimits {
                vgpr_granule: 24,
                vgprs_per_simd: 1536,
                max_waves: 16,
                lds_per_cu: 128 * 1024,
                lds_per_workgroup: 64 * 1024,
                simds_per_cu: 4,
                workgroup_slots: 32,
                unified_agprs: false,
            },
            Target::Gfx1250 => OccupancyLimits {
                vgpr_granule: 16,
                vgprs_per_simd: 1024,
                max_waves: 16,
                lds_per_cu: 320 * 1024,
                lds_per_workgroup: 320 * 1024,
                simds_per_cu: 4,
                workgroup_slots: 16,
                unified_agprs: false,
            },
            Target::Sm90 => return None,
        })
    }
}

/// Waves per SIMD that a kernel can keep resident.
///
/// The formula (LLVM's, `GCNSubtarget` / `AMDGPUBaseInfo`):
///
/// 1. registers: `regs = alignTo(vgpr, 4) + agpr` on gfx942/gfx950 (AGPRs follow the arch
///    VGPRs in one file; just `vgpr` when `agpr == 0`), `vgpr + agpr` elsewhere;
///    `waves_regs = min(max_waves, vgprs_per_simd / alignTo(max(regs, 1), granule))`;
/// 2. LDS: `groups = min(lds_per_cu / lds_bytes, slots)` where `slots` is the workgroup slot
///    count for multi-wave workgroups (unbounded for one-wave workgroups, and no LDS limit
///    when `lds_bytes == 0`); `waves_lds = min(max_waves,
///    ceil(groups * waves_per_workgroup / simds_per_cu))`;
/// 3. the result is `min(waves_regs, waves_lds)`.
///
/// Returns 0 when the kernel cannot run at all (more LDS than one workgroup may allocate,
/// more registers than a wave may hold), and 0 for a non-AMD target. A
/// `waves_per_workgroup` of 0 counts as 1. SGPRs do not limit occupancy on these targets
/// below 100 SGPRs (LLVM's limit is 102), so they are not an input.
///
/// ```
/// use flydsl_ir::{codeobj::occupancy, Target};
/// // Anchors from the reference library: 88 VGPRs, 8 KiB LDS, 4 waves -> 5 waves/SIMD.
/// assert_eq!(occupancy(Target::Gfx942, 88, 0, 8192, 4), 5);
/// // 256 VGPRs + 26 AGPRs -> 288 registers -> 1 wave.
/// assert_eq!(occupancy(Target::Gfx942, 256, 26, 33792, 4), 1);
/// // gfx1201: 140 VGPRs -> alignTo(140, 24) = 144 -> 1536 / 144 = 10.
/// assert_eq!(occupancy(Target::Gfx1201, 140, 0, 0, 8), 10);
/// // LDS-bound: two 24 KiB workgroups of 4 waves fit in 64 KiB -> 8 waves on 4 SIMDs.
/// assert_eq!(occupancy(Target::Gfx942, 32, 0, 24576, 4), 2);
/// // Too much LDS for one workgroup.
/// assert_eq!(occupancy(Target::Gfx942, 32, 0, 65537, 4), 0);
/// ```
pub fn occupancy(
    target: Target,
    vgpr: u32,
    agpr: u32,
    lds_bytes: u32,
    waves_per_workgroup: u32,
) -> u32 {
    let Some(l) = OccupancyLimits::of(target) else {
        return 0;
    };
    let regs = if l.unified_agprs && agpr > 0 {
        vgpr.checked_next_multiple_of(4)
            .unwrap_or(u32::MAX)
            .saturating_add(agpr)
    } else {
        vgpr.saturating_add(agpr)
    };
    let allocated = regs
        .max(1)
        .checked_next_multiple_of(l.vgpr_granule)
        .unwrap_or(u32::MAX);
    let by_regs = (l.vgprs_per_simd / allocated).min(l.max_waves);
    if lds_bytes > l.lds_per_workgroup {
        return 0;
    }
    let wpw = waves_per_workgroup.max(1);
    let slots = if wpw == 1 {
        u32::MAX
    } else {
        l.workgroup_slots
    };
    let groups = match lds_bytes {
        0 => slots,
        n => (l.lds_per_cu / n).min(slots),
    };
    let waves_per_cu = u64::from(groups) * u64::from(wpw);
    let by_lds = waves_per_cu
        .div_ceil(u64::from(l.simds_per_cu))
        .min(u64::from(l.max_waves));
    by_regs.min(by_lds as u32)
}
