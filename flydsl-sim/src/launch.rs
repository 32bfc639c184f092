//! Launch driver: validation, kernel-argument decoding, and running workgroups in parallel.

use crate::exec::{Ctx, ParamBuf, Wg};
use crate::memory::split;
use crate::numeric::mask;
use crate::{SimError, SimMemory, SimOptions};
use flydsl_ir::{Kernel, ParamKind, ScalarType, ValueId};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Statistics of one simulated launch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchReport {
    /// Workgroups executed.
    pub workgroups: u64,
    /// Threads per workgroup.
    pub threads_per_block: u32,
    /// Waves per workgroup.
    pub waves_per_block: u32,
    /// IR ops interpreted, summed over workgroups (each op counts once per workgroup).
    pub ops_executed: u64,
    /// The most bytes of SSA value storage one worker held at once (values get storage when
    /// computed and give it back after their last use, so this follows the live set).
    pub peak_value_bytes: u64,
}

fn invalid(k: &Kernel, reason: String) -> SimError {
    SimError::InvalidLaunch {
        kernel: k.name.clone(),
        reason,
    }
}

/// Decoded kernel arguments: (value, bits) pairs and the tensor buffers.
type DecodedArgs = (Vec<(ValueId, u64)>, Vec<ParamBuf>);

/// Decode the kernel arguments into (value, bits) pairs and the tensor buffers.
fn decode_args(k: &Kernel, kernarg: &[u8]) -> Result<DecodedArgs, SimError> {
    let layout = k.kernarg_layout();
    let mut args = Vec::new();
    let mut bufs = Vec::new();
    let mut slot_of_param = vec![0usize; k.params.len()];
    for s in &layout.slots {
        let end = s.offset as usize + s.size as usize;
        let bytes = kernarg.get(s.offset as usize..end).ok_or_else(|| {
            invalid(
                k,
                format!(
                    "kernarg buffer is {} bytes but argument `{}` needs bytes {}..{end} \
                     (pack it with kernel.kernarg_layout(), {} bytes)",
                    kernarg.len(),
                    s.name,
                    s.offset,
                    layout.size
                ),
            )
        })?;
        let mut w = [0u8; 8];
        w[..bytes.len()].copy_from_slice(bytes);
        let raw = u64::from_le_bytes(w);
        let nth = slot_of_param[s.param];
        slot_of_param[s.param] += 1;
        let Some(&v) = k.param_values.get(s.param).and_then(|vs| vs.get(nth)) else {
            return Err(invalid(
                k,
                format!("parameter `{}` has no SSA value", s.name),
            ));
        };
        let bits = match k.params[s.param].kind {
            ParamKind::Scalar(ScalarType::I1) => (raw != 0) as u64,
            ParamKind::Scalar(st) => raw & mask(st.bits()),
            ParamKind::Tensor { .. } => raw,
        };
        if s.is_pointer {
            let (handle, base_off) = split(raw);
            bufs.push(ParamBuf {
                name: k.params[s.param].name.clone(),
                handle,
                base_off,
            });
        }
        args.push((v, bits));
    }
    Ok((args, bufs))
}

/// Validate the launch and build its context.
fn prepare<'k>(
    k: &'k Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_lds_bytes: u32,
    kernarg: &[u8],
    mem: &SimMemory,
    opts: &SimOptions,
) -> Result<Ctx<'k>, SimError> {
    flydsl_ir::verify(k)?;
    let threads = block.iter().map(|&b| b as u64).product::<u64>();
    let limit = k.attrs.max_threads.min(k.target.max_threads_per_block()) as u64;
    if threads == 0 || threads > limit {
        return Err(invalid(
            k,
            format!(
                "block {block:?} has {threads} threads; the kernel allows 1..={limit} \
                 (attrs.max_threads = {})",
                k.attrs.max_threads
            ),
        ));
    }
    let lds_total = match &k.dynamic_lds {
        Some(_) => u64::from(k.dynamic_lds_offset()) + u64::from(dynamic_lds_bytes),
        None => u64::from(k.lds_bytes()),
    };
    let lds_limit = k.target.max_total_lds_bytes();
    if lds_total > u64::from(lds_limit) {
        return Err(invalid(
            k,
            format!(
                "{lds_total} bytes of LDS per workgroup ({} static, {dynamic_lds_bytes} \
                 dynamic) exceed the {} limit of {lds_limit} bytes",
                k.dynamic_lds_offset(),
                k.target
            ),
        ));
    }
    let (args, params) = decode_args(k, kernarg)?;
    Ok(Ctx::new(
        k,
        grid,
        block,
        mem.snapshot(),
        params,
        args,
        opts,
        dynamic_lds_bytes,
    ))
}

/// Execute a launch and report statistics. See [`crate::launch`].
pub fn launch_report(
    kernel: &Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    kernarg: &[u8],
    mem: &SimMemory,
    opts: &SimOptions,
) -> Result<LaunchReport, SimError> {
    launch_with_lds(kernel, grid, block, 0, kernarg, mem, opts)
}

/// [`launch_report`] with `dynamic_lds_bytes` of dynamic LDS per workgroup (the size of the
/// kernel's `dynamic_lds` region; accesses past it are out-of-bounds errors under memcheck).
///
/// ```
/// use flydsl_ir::{DynamicLds, Kernel, Target};
/// use flydsl_sim::{launch_with_lds, SimMemory, SimOptions};
/// let mut k = Kernel::empty("k", Target::Gfx942);
/// k.dynamic_lds = Some(DynamicLds { name: "smem".into() });
/// let mem = SimMemory::new();
/// let opts = SimOptions::default();
/// launch_with_lds(&k, [1, 1, 1], [64, 1, 1], 4096, &[], &mem, &opts).unwrap();
/// // More than the target's 64 KiB is refused.
/// assert!(launch_with_lds(&k, [1, 1, 1], [64, 1, 1], 65537, &[], &mem, &opts).is_err());
/// ```
pub fn launch_with_lds(
    kernel: &Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_lds_bytes: u32,
    kernarg: &[u8],
    mem: &SimMemory,
    opts: &SimOptions,
) -> Result<LaunchReport, SimError> {
    let cx = prepare(kernel, grid, block, dynamic_lds_bytes, kernarg, mem, opts)?;
    let total = grid.iter().map(|&g| g as u128).product::<u128>();
    let total = u64::try_from(total)
        .ok()
        .filter(|&t| usize::try_from(t).is_ok())
        .ok_or_else(|| invalid(kernel, format!("grid {grid:?} has too many workgroups")))?;
    let ws = kernel.target.wave_size();
    let mut report = LaunchReport {
        workgroups: total,
        threads_per_block: cx.nthreads as u32,
        waves_per_block: (cx.nthreads as u32).div_ceil(ws),
        ops_executed: 0,
        peak_value_bytes: 0,
    };
    if total == 0 {
        return Ok(report);
    }
    let ops = AtomicU64::new(0);
    let peak = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let first_err: Mutex<Option<(u64, SimError)>> = Mutex::new(None);
    let record = |idx: u64, e: SimError| {
        let mut g = first_err.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_none_or(|(i, _)| idx < *i) {
            *g = Some((idx, e));
        }
        stop.store(true, Ordering::Relaxed);
    };
    let run_one = |wg: &mut Wg<'_, '_>, idx: u64| {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        wg.ops = 0;
        let r = wg.run(idx);
        ops.fetch_add(wg.ops, Ordering::Relaxed);
        peak.fetch_max(wg.peak_words as u64 * 8, Ordering::Relaxed);
        if let Err(e) = r {
            record(idx, e);
        }
    };
    // Workgroups that wait on other agents' flags run in order on this thread (see
    // `exec::has_flag_wait`).
    let workers = match opts.threads {
        _ if crate::exec::has_flag_wait(kernel) => 1,
        0 => rayon::current_num_threads(),
        n => n,
    };
    if workers <= 1 || total == 1 {
        let mut wg = Wg::new(&cx);
        for idx in 0..total {
            run_one(&mut wg, idx);
        }
    } else {
        let min_len = (total / (workers as u64 * 4)).max(1) as usize;
        let body = || {
            (0..total as usize)
                .into_par_iter()
                .with_min_len(min_len)
                .for_each_init(|| Wg::new(&cx), |wg, idx| run_one(wg, idx as u64))
        };
        if opts.threads == 0 {
            body();
        } else {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(workers)
                .build()
                .map_err(|e| SimError::Other(format!("cannot start {workers} sim threads: {e}")))?;
            pool.install(body);
        }
    }
    if let Some((_, e)) = first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    report.ops_executed = ops.into_inner();
    report.peak_value_bytes = peak.into_inner();
    Ok(report)
}
