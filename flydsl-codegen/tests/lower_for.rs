//! The `For` lowering: the latch steps `iv` by `umin(step, ub - iv)`, so it cannot overflow,
//! at the bounds' width (i32 or i64), on every target; and the Sim runs the same kernels to the
//! same trip counts near the type's maximum.

mod common_lower;
use common_lower::{compile, tools};
use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::*;
use flydsl_sim::{launch, SimMemory, SimOptions};

/// `out = [iterations, sum of iv]` of `for iv in (lb..ub).step_by(step)` over scalar bounds of
/// type `st`.
fn count_kernel(target: Target, st: ScalarType) -> Kernel {
    KernelBuilder::new(&format!("count_{st}"), target, 64)
        .build(|k| {
            let out = k.tensor_mut("out", ScalarType::I64);
            let lb = k.scalar("lb", st);
            let ub = k.scalar("ub", st);
            let step = k.scalar("step", st);
            let r = for_range(lb, ub, step, &[c_i64(0), c_i64(0)], |iv, c| {
                vec![c[0] + c_i64(1), c[1] + iv.cast(ScalarType::I64)]
            });
            out.store(c_i32(0), r[0]);
            out.store(c_i32(1), r[1]);
        })
        .unwrap()
}

/// The lines of the function body that mention the loop's induction variable.
fn iv_lines(ir: &str) -> Vec<&str> {
    ir.lines()
        .filter(|l| l.contains(".iv") && !l.trim_start().starts_with(';'))
        .collect()
}

#[test]
fn latch_is_overflow_free_at_the_bounds_width() {
    for st in [ScalarType::I32, ScalarType::I64] {
        let t = st.name();
        for target in Target::ALL {
            let k = count_kernel(target, st);
            let ir = flydsl_codegen::lower(&k).unwrap();
            let lines = iv_lines(&ir);
            let has = |pat: &str| lines.iter().any(|l| l.contains(pat));
            // The iv is of the bounds' type, tested against `ub` in the header...
            assert!(has(&format!(".iv = phi {t} ")), "{target} {t}:\n{ir}");
            assert!(has(&format!("icmp slt {t} %loop")), "{target} {t}:\n{ir}");
            // ...and stepped by umin(step, ub - iv): it lands on ub instead of wrapping.
            assert!(has(&format!("= sub {t} ")), "{target} {t}:\n{ir}");
            assert!(
                ir.contains(&format!("call {t} @llvm.umin.{t}(")),
                "{target} {t}:\n{ir}"
            );
            // The increment is the umin of the step and `ub - iv`: follow the operands back.
            let next = lines
                .iter()
                .find(|l| l.contains(".ivnext = add"))
                .unwrap_or_else(|| panic!("{target} {t}: no increment:\n{ir}"));
            let inc = next.rsplit(", ").next().unwrap().trim();
            let def = |v: &str| {
                ir.lines()
                    .find(|l| l.trim_start().starts_with(&format!("{v} = ")))
                    .unwrap_or_else(|| panic!("{target} {t}: {v} undefined:\n{ir}"))
            };
            let umin = def(inc);
            assert!(
                umin.contains(&format!("@llvm.umin.{t}(")),
                "{target} {t}: {umin}"
            );
            let rem = umin.split(['(', ',']).nth(1).unwrap().trim();
            let rem = rem.trim_start_matches(&format!("{t} "));
            let sub = def(rem);
            assert!(
                sub.contains(&format!("= sub {t} ")) && sub.trim_end().ends_with(".iv"),
                "{target} {t}: {sub}"
            );
            assert!(
                ir.contains(&format!("declare {t} @llvm.umin.{t}({t}, {t})")),
                "{ir}"
            );
        }
    }
}

#[test]
fn latch_compiles_on_every_target() {
    let Some(tools) = tools() else { return };
    for target in Target::ALL {
        for st in [ScalarType::I32, ScalarType::I64] {
            let c = compile(&tools, &count_kernel(target, st));
            assert!(!c.asm.is_empty(), "{target} {st}");
        }
    }
}

/// Run the kernel on the Sim and return `(iterations, sum of iv)`.
fn sim_count(k: &Kernel, bounds: [i64; 3], st: ScalarType) -> (i64, i64) {
    let mem = SimMemory::new();
    let out = mem.alloc(16).unwrap();
    mem.write(out, &[0u8; 16]).unwrap();
    let layout = k.kernarg_layout();
    let mut args = vec![0u8; layout.size as usize];
    let mut put = |i: usize, b: &[u8]| {
        let o = layout.slots[i].offset as usize;
        args[o..o + b.len()].copy_from_slice(b);
    };
    put(0, &out.to_le_bytes());
    put(1, &2i64.to_le_bytes());
    for (i, v) in bounds.into_iter().enumerate() {
        if st == ScalarType::I32 {
            put(2 + i, &(v as i32).to_le_bytes());
        } else {
            put(2 + i, &v.to_le_bytes());
        }
    }
    launch(k, [1, 1, 1], [1, 1, 1], &args, &mem, &SimOptions::default()).unwrap();
    let mut b = [0u8; 16];
    mem.read(out, &mut b).unwrap();
    (
        i64::from_le_bytes(b[..8].try_into().unwrap()),
        i64::from_le_bytes(b[8..].try_into().unwrap()),
    )
}

#[test]
fn sim_runs_the_lowered_contract_near_the_maximum() {
    let reference = |[lb, ub, step]: [i64; 3]| {
        let (mut i, mut n, mut s) = (lb as i128, 0i64, 0i64);
        while i < ub as i128 {
            n += 1;
            s = s.wrapping_add(i as i64);
            i += step as i128;
        }
        (n, s)
    };
    let m32 = i32::MAX as i64;
    for target in [Target::Gfx942, Target::Sm90] {
        let k = count_kernel(target, ScalarType::I32);
        for b in [[m32 - 10, m32, 4], [0, m32, 1 << 30], [m32 - 1, m32, 1]] {
            assert_eq!(
                sim_count(&k, b, ScalarType::I32),
                reference(b),
                "{target} {b:?}"
            );
        }
        let k = count_kernel(target, ScalarType::I64);
        let m = i64::MAX;
        for b in [[m - 10, m, 4], [m32 - 10, m32 + 10, 4]] {
            assert_eq!(
                sim_count(&k, b, ScalarType::I64),
                reference(b),
                "{target} {b:?}"
            );
        }
    }
}
