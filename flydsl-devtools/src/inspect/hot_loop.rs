//! The instruction mix of a kernel's hot loop in an `llvm-objdump -d` listing of AMD code:
//! the loop (a backward branch and the instructions from its target to it) with the most
//! matrix instructions.

/// Instruction counts of one loop body (see [`hot_loop_mix`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstructionMix {
    /// Matrix instructions (`v_mfma*`, `v_wmma*`, `v_smfmac*`).
    pub mma: usize,
    /// Vector memory loads (`buffer_load*`, `global_load*`, `tensor_load*`).
    pub vmem_load: usize,
    /// Vector memory stores (`buffer_store*`, `global_store*`).
    pub vmem_store: usize,
    /// LDS reads (`ds_read*`, `ds_load*`).
    pub ds_read: usize,
    /// LDS writes (`ds_write*`, `ds_store*`).
    pub ds_write: usize,
    /// Wait counters (`s_waitcnt*`, `s_wait_*`).
    pub waitcnt: usize,
    /// Workgroup barriers (`s_barrier*`).
    pub barrier: usize,
    /// Every instruction of the loop body.
    pub total: usize,
}

impl InstructionMix {
    fn add(&mut self, m: &str) {
        let starts = |p: &[&str]| p.iter().any(|p| m.starts_with(p));
        self.total += 1;
        if starts(&["v_mfma", "v_wmma", "v_smfmac"]) {
            self.mma += 1;
        } else if starts(&["buffer_load", "global_load", "tensor_load"]) {
            self.vmem_load += 1;
        } else if starts(&["buffer_store", "global_store"]) {
            self.vmem_store += 1;
        } else if starts(&["ds_read", "ds_load"]) {
            self.ds_read += 1;
        } else if starts(&["ds_write", "ds_store"]) {
            self.ds_write += 1;
        } else if starts(&["s_waitcnt", "s_wait_"]) {
            self.waitcnt += 1;
        } else if m.starts_with("s_barrier") {
            self.barrier += 1;
        }
    }
}

/// One instruction line: its address, mnemonic and (for a branch) its target address.
fn instruction(line: &str, base: u64) -> Option<(u64, &str, Option<u64>)> {
    if !line.starts_with([' ', '\t']) {
        return None;
    }
    let m = line.split_whitespace().next()?;
    let (_, comment) = line.split_once("//")?;
    let addr = u64::from_str_radix(comment.trim().split(':').next()?.trim(), 16).ok()?;
    let branch = m.starts_with("s_cbranch") || m.starts_with("s_branch");
    let target = branch
        .then(|| {
            let sym = comment.split_once('<')?.1;
            let off = sym
                .split_once("+0x")
                .map_or("0", |(_, o)| o.trim_end_matches('>'));
            Some(base + u64::from_str_radix(off, 16).ok()?)
        })
        .flatten();
    Some((addr, m, target))
}

/// The mix of the loop with the most matrix instructions (ties: the longest) in a listing
/// of one kernel; `None` when the code has no loop.
///
/// ```
/// use flydsl_devtools::inspect::hot_loop_mix;
/// let d = "\
/// 0000000000001000 <k>:
/// \ts_mov_b32 s0, 0 // 000000001000: BE800080
/// \tds_read_b128 v[0:3], v4 // 000000001004: D9FE0000 00000004
/// \tv_mfma_f32_16x16x16_bf16 a[0:3], v[0:1], v[2:3], a[0:3] // 00000000100C: D3ED8000 04020500
/// \ts_waitcnt vmcnt(0) // 000000001014: BF8C0F70
/// \ts_cbranch_scc0 65532 // 000000001018: BF84FFFC <k+0x4>
/// \ts_endpgm // 00000000101C: BF810000
/// ";
/// let mix = hot_loop_mix(d).unwrap();
/// assert_eq!((mix.mma, mix.ds_read, mix.waitcnt, mix.total), (1, 1, 1, 4));
/// ```
pub fn hot_loop_mix(disasm: &str) -> Option<InstructionMix> {
    let mut base = 0u64;
    let mut code: Vec<(u64, &str)> = Vec::new();
    let mut loops: Vec<(u64, u64)> = Vec::new();
    for line in disasm.lines() {
        if let Some((addr, rest)) = line.split_once(" <") {
            if rest.ends_with(">:") {
                if let Ok(a) = u64::from_str_radix(addr.trim(), 16) {
                    base = a;
                }
                continue;
            }
        }
        let Some((addr, m, target)) = instruction(line, base) else {
            continue;
        };
        code.push((addr, m));
        if let Some(t) = target.filter(|&t| t <= addr) {
            loops.push((t, addr));
        }
    }
    loops
        .iter()
        .map(|&(from, to)| {
            let mut mix = InstructionMix::default();
            for &(a, m) in &code {
                if (from..=to).contains(&a) {
                    mix.add(m);
                }
            }
            mix
        })
        .max_by_key(|m| (m.mma, m.total))
}
