//! `ldmatrix` / `stmatrix` ([`NvOp::LdMatrix`], [`NvOp::StMatrix`]) on the Sim: a warp moves
//! up to four 8 x 8 matrices of 16-bit elements between LDS rows (one row address per lane)
//! and the `mma.sync` fragment layout.

use super::memops::Loc;
use super::Wg;
use crate::race::Access;
use crate::SimError;
use flydsl_ir::{NvOp, Op, ValueId};

/// Up to four 8 x 8 matrices of 16-bit elements.
type Mats = [[[u16; 8]; 8]; 4];

/// Lane `l`'s two elements of register `i`: `(row, col)` of the first; the second is the next
/// column (the next row with `trans`).
fn frag_coord(l: usize, trans: bool) -> [(usize, usize); 2] {
    let (g, q) = (l / 4, 2 * (l % 4));
    if trans {
        [(q, g), (q + 1, g)]
    } else {
        [(g, q), (g, q + 1)]
    }
}

impl Wg<'_, '_> {
    /// Locate lane thread `t`'s 16-byte LDS row (None: dropped with memcheck off).
    fn matrix_row(
        &mut self,
        p: ValueId,
        t: u32,
        op: &str,
        access: &'static str,
    ) -> Result<Option<(Loc, usize)>, SimError> {
        let loc = self.locate(self.val(p)[t as usize], 0, 1, 16, access, t)?;
        match loc {
            Loc::Lds(byte, ..) if byte.is_multiple_of(16) => Ok(Some((loc, byte))),
            Loc::Lds(byte, ..) => Err(self.fault(
                op,
                t,
                format!("row address LDS byte {byte} is not 16-byte aligned"),
            )),
            Loc::Dropped => Ok(None),
            Loc::Global(..) => Err(self.fault(op, t, "the row address is not an LDS pointer")),
        }
    }

    /// Run `LdMatrix` or `StMatrix` over the active threads (whole warps).
    pub(super) fn matrix_op(&mut self, op: &Op, nv: &NvOp, act: &[u32]) -> Result<(), SimError> {
        let (ptr, count, trans, value, name) = match nv {
            NvOp::LdMatrix { ptr, count, trans } => {
                (*ptr, *count as usize, *trans, None, "LdMatrix")
            }
            NvOp::StMatrix {
                ptr,
                value,
                count,
                trans,
            } => (*ptr, *count as usize, *trans, Some(*value), "StMatrix"),
            _ => return Err(self.unsupported(format!("{nv:?} is not ldmatrix/stmatrix"))),
        };
        let ws = self.cx.wave;
        let mut out = match value {
            None => Some(self.take(op.results[0])),
            Some(_) => None,
        };
        for warp in act.chunks(ws) {
            let w0 = warp[0] as usize;
            if warp.len() != ws || !w0.is_multiple_of(ws) || warp[ws - 1] as usize != w0 + ws - 1 {
                return Err(self.fault(
                    name,
                    warp[0],
                    "all 32 lanes of the warp must execute it (.sync.aligned)",
                ));
            }
            let mut m: Mats = [[[0; 8]; 8]; 4];
            if let Some(v) = value {
                let src = self.val(v);
                for l in 0..ws {
                    for (i, mat) in m.iter_mut().enumerate().take(count) {
                        let word = src[(w0 + l) * count + i] as u32;
                        let [(r0, c0), (r1, c1)] = frag_coord(l, trans);
                        mat[r0][c0] = word as u16;
                        mat[r1][c1] = (word >> 16) as u16;
                    }
                }
            }
            for (i, mat) in m.iter_mut().enumerate().take(count) {
                for (r, row) in mat.iter_mut().enumerate() {
                    let t = (w0 + 8 * i + r) as u32;
                    let access = if value.is_some() {
                        "stmatrix"
                    } else {
                        "ldmatrix"
                    };
                    let Some((loc, byte)) = self.matrix_row(ptr, t, name, access)? else {
                        continue;
                    };
                    if value.is_some() {
                        self.race(loc, 16, t, Access::Write)?;
                        for (c, e) in row.iter().enumerate() {
                            self.lds[byte + 2 * c..byte + 2 * c + 2]
                                .copy_from_slice(&e.to_le_bytes());
                        }
                        self.mark_init(byte, 16);
                    } else {
                        self.race(loc, 16, t, Access::Read)?;
                        self.check_pending(byte, 16, t, name)?;
                        self.check_init(loc, 16, t, access)?;
                        for (c, e) in row.iter_mut().enumerate() {
                            *e = u16::from_le_bytes([
                                self.lds[byte + 2 * c],
                                self.lds[byte + 2 * c + 1],
                            ]);
                        }
                    }
                }
            }
            if let Some(o) = &mut out {
                for l in 0..ws {
                    for (i, mat) in m.iter().enumerate().take(count) {
                        let [(r0, c0), (r1, c1)] = frag_coord(l, trans);
                        o[(w0 + l) * count + i] = mat[r0][c0] as u64 | (mat[r1][c1] as u64) << 16;
                    }
                }
            }
        }
        if let Some(o) = out {
            self.put(op.results[0], o);
        }
        Ok(())
    }
}
