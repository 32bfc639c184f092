//! The Hopper miscellany proof: `setmaxnreg`, `elect.sync` and an `stmatrix` / `ldmatrix`
//! round trip through LDS in one small sm_90 kernel, so the H200 checks each against the
//! Sim (the NVIDIA ops that no other proof kernel runs on hardware).

use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::*;

/// Threads per block of [`hopper_misc`] (one warpgroup: `setmaxnreg` acts per warpgroup).
pub const HOPPER_MISC_BLOCK: u32 = 128;
/// The register budget [`hopper_misc`] starts with (`KernelAttrs::max_registers`).
pub const HOPPER_MISC_REGS: u32 = 128;
/// The budget [`hopper_misc`] drops to with `setmaxnreg.dec` before raising it back.
pub const HOPPER_MISC_DEC_REGS: u32 = 96;
/// 16-bit elements between the rows of one 8 x 8 matrix in [`hopper_misc`]'s LDS (rows are
/// 32 bytes apart, so a row address is not just `lane * 16` bytes).
pub const HOPPER_MISC_ROW_PITCH: u32 = 16;
/// 16-bit elements of LDS per warp in [`hopper_misc`]: 4 matrices of 8 rows.
pub const HOPPER_MISC_WARP_ELEMS: u32 = 4 * 8 * HOPPER_MISC_ROW_PITCH;

/// One warpgroup (blocks of [`HOPPER_MISC_BLOCK`], registers capped at
/// [`HOPPER_MISC_REGS`]):
///
/// 1. `setmaxnreg.dec` to [`HOPPER_MISC_DEC_REGS`];
/// 2. `elect.sync`: the elected lane of each warp adds 1 to `count[0]` (atomically), so
///    `count[0]` ends as the number of warps launched;
/// 3. thread `t` of block `b` (lane `l` of warp `w`; `g = 128 b + t`) loads `src[4g .. 4g + 4]` (i32, each two 16-bit
///    elements, low half first) as a 4-matrix `stmatrix` fragment and the warp stores its 4
///    8 x 8 matrices to LDS: lane `8i + r` addresses row `r` of matrix `i` at 16-bit element
///    `w * HOPPER_MISC_WARP_ELEMS + i * 8 * HOPPER_MISC_ROW_PITCH + r * HOPPER_MISC_ROW_PITCH`;
/// 4. a barrier, then the warp reads the same rows back with `ldmatrix.x4.trans`;
/// 5. `setmaxnreg.inc` to [`HOPPER_MISC_REGS`], and the thread stores its 4 registers to
///    `out[4g .. 4g + 4]`.
///
/// So `out` holds, per warp and matrix, the `ldmatrix` fragment of the transpose of the
/// matrix the `stmatrix` fragment described (the layouts are in `NvOp::LdMatrix`). sm_90
/// only (the ops are Hopper's); a build error elsewhere.
///
/// ```
/// use flydsl_devtools::proof::hopper_misc;
/// use flydsl_dsl::ir::Target;
/// let k = hopper_misc(Target::Sm90).unwrap();
/// assert_eq!(k.attrs.max_registers, Some(128));
/// assert!(hopper_misc(Target::Gfx950).is_err());
/// ```
pub fn hopper_misc(target: Target) -> Result<Kernel, BuildError> {
    let warps = HOPPER_MISC_BLOCK / 32;
    KernelBuilder::new("hopper_misc", target, HOPPER_MISC_BLOCK)
        .max_registers(Some(HOPPER_MISC_REGS))
        .build(|k| {
            let src = k.tensor("src", ScalarType::I32);
            let out = k.tensor_mut("out", ScalarType::I32);
            let count = k.tensor_mut("count", ScalarType::I32);
            let tiles = k.lds_aligned("tiles", ScalarType::I16, warps * HOPPER_MISC_WARP_ELEMS, 16);
            nv::setmaxnreg(false, HOPPER_MISC_DEC_REGS);
            let t = thread_id_x();
            let (w, l) = (t / 32, t % 32);
            if_(nv::elect_one(), || {
                count.atomic_add(0, c_i32(1));
            });
            let g = block_id_x() * HOPPER_MISC_BLOCK as i32 + t;
            let frag = src.load_vec(g * 4, 4, 16);
            let pitch = HOPPER_MISC_ROW_PITCH as i32;
            let row = w * HOPPER_MISC_WARP_ELEMS as i32 + (l / 8) * (8 * pitch) + (l % 8) * pitch;
            let at = tiles.ptr_at(row);
            nv::stmatrix(at, frag, 4, false);
            barrier();
            let back = nv::ldmatrix(at, 4, true);
            nv::setmaxnreg(true, HOPPER_MISC_REGS);
            out.store_aligned(g * 4, back, 16, false);
        })
}
