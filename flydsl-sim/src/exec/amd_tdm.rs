//! The gfx1250 Tensor Data Mover load (`AmdOp::TensorLoadToLds`, 2-D form) on the Sim: the
//! descriptor decoded by `flydsl_ir::TdmDesc`, the tile read from global memory when the
//! load issues (memcheck applies), and its LDS writes pending per wave until a
//! `WaitTensorcnt` retires them (`amd_ops`).

use super::amd_state::Pending;
use super::Wg;
use crate::SimError;
use flydsl_ir::{TdmDesc, ValueId};
use std::collections::VecDeque;

const OP: &str = "TensorLoadToLds";

impl Wg<'_, '_> {
    /// Issue one TDM load per wave with an active lane.
    pub(super) fn tensor_load_to_lds(
        &mut self,
        groups: &[ValueId],
        act: &[u32],
    ) -> Result<(), SimError> {
        let [g0, g1] = *groups else {
            return Err(self.unsupported(format!(
                "{OP} with {} descriptor groups (a 3-D to 5-D tile): the Sim runs the 2-group \
                 (2-D) form only",
                groups.len()
            )));
        };
        let wave = self.cx.wave;
        let nwaves = self.cx.nthreads.div_ceil(wave);
        if self.amd.tdm.len() < nwaves {
            self.amd.tdm.resize_with(nwaves, VecDeque::new);
        }
        if self.amd.pending.len() < self.lds.len() {
            self.amd.pending.resize(self.lds.len(), 0);
        }
        let mut done = vec![false; nwaves];
        for &t in act {
            let w = t as usize / wave;
            if done[w] {
                continue;
            }
            done[w] = true;
            let words = |v: ValueId, n: usize, s: &Self, t: u32| -> Vec<u32> {
                s.val(v)[t as usize * n..t as usize * n + n]
                    .iter()
                    .map(|&x| x as u32)
                    .collect()
            };
            let (w0, w1) = (words(g0, 4, self, t), words(g1, 8, self, t));
            // Every active lane of the wave must hold the same descriptor (scalar registers).
            for &u in act.iter().filter(|&&u| u as usize / wave == w) {
                if words(g0, 4, self, u) != w0 || words(g1, 8, self, u) != w1 {
                    return Err(self.fault(
                        OP,
                        u,
                        format!(
                            "the descriptor differs from thread {:?}'s in the same wave: it \
                             must be wave-uniform (scalar registers)",
                            self.thread_ref(t).thread
                        ),
                    ));
                }
            }
            let d = TdmDesc::decode(&w0, &w1).map_err(|e| {
                if e.contains("does not model") {
                    self.unsupported(format!("{OP}: {e}"))
                } else {
                    self.fault(OP, t, e)
                }
            })?;
            if !d.pred {
                continue;
            }
            let writes = self.tdm_writes(&d, t)?;
            for p in &writes {
                for c in &mut self.amd.pending[p.byte..p.byte + p.n] {
                    *c = c.saturating_add(1);
                }
            }
            self.amd.tdm[w].push_back(writes);
            self.amd.count += 1;
        }
        Ok(())
    }

    /// Read the tile of `d` now and return its LDS writes (one per element).
    fn tdm_writes(&mut self, d: &TdmDesc, t: u32) -> Result<Vec<Pending>, SimError> {
        let es = d.elem_bytes as usize;
        let [cols, rows] = d.tile_dims.map(u64::from);
        let mut out = Vec::with_capacity((rows * cols) as usize);
        for r in 0..rows {
            for c in 0..cols {
                let mut data = [0u8; 16];
                if r < u64::from(d.tensor_dims[1]) && c < u64::from(d.tensor_dims[0]) {
                    let off = (r * d.stride + c) * es as u64;
                    let addr = d.global_addr.wrapping_add(off);
                    self.read_global_bytes(addr, &mut data[..es], "load", t)?;
                }
                let byte = u64::from(d.lds_addr) + d.lds_offset(r * cols + c);
                let (byte, region, region_off) = self.lds_region_of(byte, es, t)?;
                out.push(Pending {
                    t,
                    byte,
                    region,
                    region_off,
                    data,
                    n: es,
                });
            }
        }
        Ok(out)
    }

    /// The LDS array holding workgroup LDS bytes `[byte, byte + n)`.
    fn lds_region_of(&self, byte: u64, n: usize, t: u32) -> Result<(usize, usize, i64), SimError> {
        let hit = self.cx.lds.iter().enumerate().find(|(_, r)| {
            byte >= r.offset as u64 && byte + n as u64 <= (r.offset + r.bytes) as u64
        });
        match hit {
            Some((id, r)) => Ok((byte as usize, id, byte as i64 - r.offset as i64)),
            None => Err(self.fault(
                OP,
                t,
                format!(
                    "the tile's LDS bytes {byte}..{} are not inside one LDS array",
                    byte + n as u64
                ),
            )),
        }
    }
}
