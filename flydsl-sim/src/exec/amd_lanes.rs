//! The AMD cross-lane and conversion ops without memory: hardware fp8 pack / unpack
//! (`AmdOp::CvtPkFp8`, `AmdOp::CvtPkF32Fp8`), the gfx950 permlane swaps
//! (`AmdOp::PermlaneSwap`) and gfx12 `v_permlanex16_b32` (`AmdOp::PermlaneX16`), each as
//! its contract in `flydsl_ir::AmdOp` says.

use super::Wg;
use crate::fp8::{decode, encode, Fp8Format};
use crate::SimError;
use flydsl_ir::{ScalarType, ValueId};

/// The format of an fp8 type the verifier accepted.
fn fmt(t: ScalarType) -> Fp8Format {
    Fp8Format::of(t).unwrap_or(Fp8Format::E4M3FN)
}

/// The op's saturating encoding: clamp to `±max` (infinities included, NaN kept), then
/// round to nearest even.
fn cvt_fp8_sat(f: Fp8Format, x: f32) -> u8 {
    let m = f.max_finite();
    encode(f, if x.is_nan() { x } else { x.clamp(-m, m) })
}

impl Wg<'_, '_> {
    /// Every lane of each `group`-lane block with an active lane must be active.
    fn whole_groups(&mut self, op: &str, group: usize, act: &[u32]) -> Result<(), SimError> {
        self.set_mask(act);
        for &t in act {
            let g = t as usize / group * group;
            if let Some(off) = (g..g + group).find(|&u| !self.mask.get(u).copied().unwrap_or(false))
            {
                return Err(self.fault(
                    op,
                    t,
                    format!(
                        "lanes {g}..{} are partly active (thread {off} is not): {op} reads \
                         the registers of all of them, so every one must run it",
                        g + group
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `v_cvt_pk_{fp8,bf8}_f32` with the clamp of `AmdOp::CvtPkFp8`.
    pub(super) fn cvt_pk_fp8(
        &mut self,
        res: ValueId,
        [a, b, old]: [ValueId; 3],
        hi: bool,
        to: ScalarType,
        act: &[u32],
    ) {
        let f = fmt(to);
        let mut r = self.take(res);
        let (va, vb, vo) = (self.val(a), self.val(b), self.val(old));
        let shift = if hi { 16 } else { 0 };
        for &t in act {
            let t = t as usize;
            let lo = cvt_fp8_sat(f, f32::from_bits(va[t] as u32)) as u32;
            let hb = cvt_fp8_sat(f, f32::from_bits(vb[t] as u32)) as u32;
            let word = (lo | hb << 8) << shift;
            let kept = (vo[t] as u32) & !(0xffff << shift);
            r[t] = u64::from(kept | word);
        }
        self.put(res, r);
    }

    /// `v_cvt_pk_f32_{fp8,bf8}`: bytes `2 hi`, `2 hi + 1` decoded exactly.
    pub(super) fn cvt_pk_f32_fp8(
        &mut self,
        res: ValueId,
        src: ValueId,
        hi: bool,
        from: ScalarType,
        act: &[u32],
    ) {
        let f = fmt(from);
        let mut r = self.take(res);
        let v = self.val(src);
        let shift = if hi { 16 } else { 0 };
        for &t in act {
            let t = t as usize;
            let w = (v[t] as u32) >> shift;
            for i in 0..2 {
                let x = decode(f, (w >> (8 * i)) as u8);
                r[t * 2 + i] = u64::from(x.to_bits());
            }
        }
        self.put(res, r);
    }

    /// `v_permlane{16,32}_swap_b32`: the whole wave swaps rows of `a` and `b`.
    pub(super) fn permlane_swap(
        &mut self,
        res: [ValueId; 2],
        [a, b]: [ValueId; 2],
        rows: u32,
        act: &[u32],
    ) -> Result<(), SimError> {
        let wave = self.cx.wave;
        self.whole_groups("PermlaneSwap", wave, act)?;
        let (va, vb) = (self.val(a).to_vec(), self.val(b).to_vec());
        let mut ra = self.take(res[0]);
        let mut rb = self.take(res[1]);
        let rows = rows as usize;
        for &t in act {
            let t = t as usize;
            let (base, l) = (t / wave * wave, t % wave);
            // The lane pair this lane belongs to: lane `l` of `a` in the upper half of a
            // `2 rows`-lane block swaps with lane `l - rows` of `b`.
            let upper = (l / rows) % 2 == 1;
            ra[t] = if upper { vb[base + l - rows] } else { va[t] };
            rb[t] = if upper { vb[t] } else { va[base + l + rows] };
        }
        self.put(res[0], ra);
        self.put(res[1], rb);
        Ok(())
    }

    /// `v_permlanex16_b32` with a constant select: the other row of each 32-lane half.
    pub(super) fn permlanex16(
        &mut self,
        res: ValueId,
        value: ValueId,
        sel: u64,
        act: &[u32],
    ) -> Result<(), SimError> {
        self.whole_groups("PermlaneX16", 32, act)?;
        let v = self.val(value).to_vec();
        let mut r = self.take(res);
        for &t in act {
            let t = t as usize;
            let (half, l) = (t / 32 * 32, t % 32);
            let other = 16 * (1 - l / 16);
            let s = ((sel >> (4 * (l % 16))) & 0xf) as usize;
            r[t] = v[half + other + s];
        }
        self.put(res, r);
        Ok(())
    }
}
