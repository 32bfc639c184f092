//! Cross-lane ops inside one wave: shuffles, readfirstlane and the matrix atoms.

use super::mma_tables::MmaTables;
use super::Wg;
use crate::mma_layout::{e8m0_value, frag_lens, scale_coord, SCALE_BLOCK_K};

use crate::numeric::{float_val, sext};
use crate::SimError;
use flydsl_ir::{MmaAtom, ShuffleMode, ValueId};

impl Wg<'_, '_> {
    /// Shuffle: lane `l` reads its source lane's value; an inactive (or missing) source reads 0
    /// like `ds_bpermute`. Xor and Down sources outside the wave leave the value unchanged; Idx
    /// wraps the lane index modulo the wave size.
    pub(super) fn shuffle(
        &mut self,
        res: ValueId,
        mode: ShuffleMode,
        v: ValueId,
        lane: ValueId,
        act: &[u32],
    ) {
        self.set_mask(act);
        let ws = self.cx.wave as i64;
        let n = self.cx.nthreads;
        let mut r = self.take(res);
        let (vv, vl) = (self.val(v), self.val(lane));
        for &t in act {
            let ti = t as usize;
            let l = t as i64 % ws;
            let wb = t as i64 - l;
            let o = sext(vl[ti], 32);
            let src = match mode {
                ShuffleMode::Xor => l ^ o,
                ShuffleMode::Idx => o.rem_euclid(ws),
                ShuffleMode::Down => l + o,
            };
            r[ti] = if !(0..ws).contains(&src) {
                vv[ti]
            } else {
                let s = (wb + src) as usize;
                if s < n && self.mask[s] {
                    vv[s]
                } else {
                    0
                }
            };
        }
        self.put(res, r);
    }

    /// The value of the lowest active lane of each wave, broadcast to the wave's active lanes.
    pub(super) fn read_first_lane(&mut self, res: ValueId, v: ValueId, act: &[u32]) {
        let ws = self.cx.wave as u32;
        let mut r = self.take(res);
        let vv = self.val(v);
        let mut cur_wave = u32::MAX;
        let mut first = 0;
        // `act` is sorted, so the first thread seen of each wave is its lowest active lane.
        for &t in act {
            if t / ws != cur_wave {
                cur_wave = t / ws;
                first = vv[t as usize];
            }
            r[t as usize] = first;
        }
        self.put(res, r);
    }

    /// `D = A * B + C` per wave with the atom's lane layout; the whole wave must be active.
    ///
    /// With `scales` (`MmaScaled`), `D = C + sum over K-blocks of 32 of
    /// scaleA(row, blk) * scaleB(col, blk) * (A_blk * B_blk)`, each scale the E8M0 byte 0 of a
    /// lane's i32 (opsel 0), placed by [`scale_coord`]. Each block's dot product is summed in
    /// f32, multiplied by the two scales in f64, rounded to f32 and added to the accumulator.
    pub(super) fn mma(
        &mut self,
        res: ValueId,
        atom: MmaAtom,
        [a, b, c]: [ValueId; 3],
        scales: Option<(ValueId, ValueId)>,
        act: &[u32],
    ) -> Result<(), SimError> {
        let target = self.cx.k.target;
        if !atom.supported_on(target) {
            return Err(self.unsupported(format!("matrix atom {atom:?} on {target}")));
        }
        if scales.is_some() != atom.is_scaled() {
            return Err(self.unsupported(format!(
                "matrix atom {atom:?} {} scales",
                if atom.is_scaled() {
                    "needs"
                } else {
                    "takes no"
                }
            )));
        }
        let ws = self.cx.wave;
        let (m, n, k) = atom.shape();
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let (la, lb, lc) = frag_lens(atom, target);
        let in_t = atom.in_type(target);
        let int = atom.is_integer();
        // Check whole waves.
        let mut i = 0;
        let mut waves = Vec::new();
        while i < act.len() {
            let w = act[i] as usize / ws;
            let mut j = i;
            while j < act.len() && act[j] as usize / ws == w {
                j += 1;
            }
            if j - i != ws {
                return Err(self.fault(
                    &format!("Mma({atom:?})"),
                    act[i],
                    format!(
                        "matrix atoms need the whole wave active: {} of {ws} lanes of wave {w} \
                         are active",
                        j - i
                    ),
                ));
            }
            waves.push(w);
            i = j;
        }
        let mut am = vec![0f32; m * k];
        let mut bm = vec![0f32; k * n];
        let mut cm = vec![0f32; m * n];
        let mut ai = vec![0i32; m * k];
        let mut bi = vec![0i32; k * n];
        let mut ci = vec![0i32; m * n];
        let mut tabs = std::mem::take(&mut self.mma_tables);
        let pos = match tabs.iter().position(|t| t.atom == atom) {
            Some(p) => p,
            None => {
                tabs.push(MmaTables::new(atom, target));
                tabs.len() - 1
            }
        };
        let tab = &tabs[pos];
        let mut r = self.take(res);
        let (va, vb, vc) = (self.val(a), self.val(b), self.val(c));
        let sv = scales.map(|(sa, sb)| (self.val(sa), self.val(sb)));
        let nblk = k.div_ceil(SCALE_BLOCK_K);
        // scale_a[i * nblk + blk], scale_b[j * nblk + blk]
        let mut sam = vec![1f64; m * nblk];
        let mut sbm = vec![1f64; n * nblk];
        for w in waves {
            if let Some((sa, sb)) = &sv {
                for lane in 0..ws {
                    let t = w * ws + lane;
                    if let Some((row, blk)) = scale_coord(atom, lane) {
                        sam[row * nblk + blk] = e8m0_value(sa[t] as u8);
                        sbm[row * nblk + blk] = e8m0_value(sb[t] as u8);
                    }
                }
            }
            for lane in 0..ws {
                let t = w * ws + lane;
                for e in 0..la {
                    let (ii, kk) = tab.a[lane * la + e];
                    let bits = va[t * la + e];
                    if int {
                        ai[ii * k + kk] = sext(bits, 8) as i32;
                    } else {
                        am[ii * k + kk] = float_val(in_t, bits) as f32;
                    }
                }
                for e in 0..lb {
                    let (kk, jj) = tab.b[lane * lb + e];
                    let bits = vb[t * lb + e];
                    if int {
                        bi[kk * n + jj] = sext(bits, 8) as i32;
                    } else {
                        bm[kk * n + jj] = float_val(in_t, bits) as f32;
                    }
                }
                for e in 0..lc {
                    let (ii, jj) = tab.c[lane * lc + e];
                    let bits = vc[t * lc + e];
                    if int {
                        ci[ii * n + jj] = bits as u32 as i32;
                    } else {
                        cm[ii * n + jj] = f32::from_bits(bits as u32);
                    }
                }
            }
            for ii in 0..m {
                for jj in 0..n {
                    if int {
                        let mut acc = ci[ii * n + jj];
                        for kk in 0..k {
                            acc = acc.wrapping_add(ai[ii * k + kk].wrapping_mul(bi[kk * n + jj]));
                        }
                        ci[ii * n + jj] = acc;
                    } else if sv.is_some() {
                        let mut acc = cm[ii * n + jj];
                        for blk in 0..nblk {
                            let mut dot = 0f32;
                            for kk in blk * SCALE_BLOCK_K..((blk + 1) * SCALE_BLOCK_K).min(k) {
                                dot += am[ii * k + kk] * bm[kk * n + jj];
                            }
                            let s = sam[ii * nblk + blk] * sbm[jj * nblk + blk];
                            acc += (dot as f64 * s) as f32;
                        }
                        cm[ii * n + jj] = acc;
                    } else {
                        let mut acc = cm[ii * n + jj];
                        for kk in 0..k {
                            acc += am[ii * k + kk] * bm[kk * n + jj];
                        }
                        cm[ii * n + jj] = acc;
                    }
                }
            }
            for lane in 0..ws {
                let t = w * ws + lane;
                for e in 0..lc {
                    let (ii, jj) = tab.c[lane * lc + e];
                    r[t * lc + e] = if int {
                        ci[ii * n + jj] as u32 as u64
                    } else {
                        cm[ii * n + jj].to_bits() as u64
                    };
                }
            }
        }
        self.put(res, r);
        self.mma_tables = tabs;
        Ok(())
    }
}
