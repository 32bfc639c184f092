//! Named, typed loop state (`for_range_with`, `if_then_else`, `Carry`, `Typed`): kernels that
//! carry structs, tuples, arrays, `Vec`s and typed values run on the Sim and match a CPU
//! reference computed here; shape and type mistakes are build errors naming the line.

use flydsl_dsl::ir::{self, ScalarType::*, Target};
use flydsl_dsl::*;

/// Run a kernel of one workgroup of `threads` threads whose parameters are `x: f32[]`,
/// `n: i32` and `out: f32[]` (any subset, by those names) on the Sim; returns `out`.
fn run(k: &ir::Kernel, threads: u32, x: &[f32], n: i32, out_len: usize) -> Vec<f32> {
    let mem = flydsl_sim::SimMemory::new();
    let xb = mem.alloc((x.len() * 4).max(4) as u64).unwrap();
    let xbytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    mem.write(xb, &xbytes).unwrap();
    let ob = mem.alloc((out_len * 4) as u64).unwrap();
    let layout = k.kernarg_layout();
    let mut args = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let o = s.offset as usize;
        let bytes: Vec<u8> = match s.name.as_str() {
            "x" => xb.to_le_bytes().to_vec(),
            "x.len" => (x.len() as u64).to_le_bytes().to_vec(),
            "out" => ob.to_le_bytes().to_vec(),
            "out.len" => (out_len as u64).to_le_bytes().to_vec(),
            "n" => n.to_le_bytes().to_vec(),
            other => panic!("unexpected kernel argument {other}"),
        };
        args[o..o + bytes.len()].copy_from_slice(&bytes);
    }
    let opts = flydsl_sim::SimOptions::default();
    flydsl_sim::launch(k, [1, 1, 1], [threads, 1, 1], &args, &mem, &opts).unwrap();
    let mut b = vec![0u8; out_len * 4];
    mem.read(ob, &mut b).unwrap();
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[derive(Clone)]
struct Online {
    m: Val,
    l: Val,
    acc: Vec<Val>,
}
carry_struct!(Online { m, l, acc });

/// Online softmax-weighted sums: for a row `x[0..n]`, `out[j] = sum_i softmax(x)_i * x_i^j`
/// for j in 0..3, with (m, l, acc) carried by name.
#[test]
fn online_softmax_struct_state_matches_reference() {
    let x: Vec<f32> = (0..37)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.37)
        .collect();
    let n = x.len() as i32;
    for t in [Target::Gfx942, Target::Sm90] {
        let k = KernelBuilder::new("online", t, 64)
            .build(|k| {
                let xs = k.tensor("x", F32);
                let n = k.scalar("n", I32);
                let out = k.tensor_mut("out", F32);
                let init = Online {
                    m: c_f32(f32::NEG_INFINITY),
                    l: c_f32(0.0),
                    acc: vec![c_f32(0.0); 3],
                };
                let s = for_range_with(0, n, 1, init, |i, s| {
                    let v = xs.load(i);
                    let m = s.m.max(v);
                    let scale = (s.m - m).exp2();
                    let p = (v - m).exp2();
                    let powers = [c_f32(1.0), v, v * v];
                    Online {
                        m,
                        l: s.l.fma(scale, p),
                        acc: (0..3).map(|j| s.acc[j].fma(scale, p * powers[j])).collect(),
                    }
                });
                for j in 0..3 {
                    out.store(j, s.acc[j as usize] / s.l);
                }
            })
            .unwrap();
        let got = run(&k, 1, &x, n, 3);
        // Reference: two-pass softmax in f64 with base-2 exponentials.
        let m = x
            .iter()
            .cloned()
            .fold(f64::NEG_INFINITY, |a, b| a.max(b as f64));
        let w: Vec<f64> = x.iter().map(|&v| (v as f64 - m).exp2()).collect();
        let l: f64 = w.iter().sum();
        for (j, g) in got.iter().enumerate() {
            let want: f64 = x
                .iter()
                .zip(&w)
                .map(|(&v, &wi)| wi * (v as f64).powi(j as i32))
                .sum::<f64>()
                / l;
            assert!(
                (*g as f64 - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{t} j={j}: got {g}, want {want}"
            );
        }
    }
}

/// Tuples, arrays, typed values and `()` through a loop, and tuples through a branch.
#[test]
fn tuples_arrays_and_typed_values_carry_through_loops_and_branches() {
    let x: Vec<f32> = (0..20).map(|i| i as f32 * 0.5 - 3.0).collect();
    let k = KernelBuilder::new("mixed", Target::Gfx1201, 32)
        .build(|k| {
            let xs = k.tensor("x", F32);
            let n = k.scalar("n", I32);
            let out = k.tensor_mut("out", F32);
            let init = (
                Typed::lit(0.0f32),
                [c_i32(0), c_i32(0)],
                (Typed::<i32>::lit(0), ()),
            );
            let (sum, [neg, pos], (count, ())) =
                for_range_with(0, n, 1, init, |i, (sum, [neg, pos], (count, ()))| {
                    let v: Typed<f32> = xs.load(i).typed();
                    let (dn, dp) =
                        if_then_else(v.lt(0.0), || (c_i32(1), c_i32(0)), || (c_i32(0), c_i32(1)));
                    (sum + v, [neg + dn, pos + dp], (count + 1, ()))
                });
            out.store(0, sum.val());
            out.store(1, neg.cast(F32));
            out.store(2, pos.cast(F32));
            out.store(3, count.cast::<f32>().val());
        })
        .unwrap();
    for n in [0usize, 1, 7, 20] {
        let got = run(&k, 1, &x, n as i32, 4);
        let xs = &x[..n];
        let want = [
            xs.iter().sum::<f32>(),
            xs.iter().filter(|v| **v < 0.0).count() as f32,
            xs.iter().filter(|v| **v >= 0.0).count() as f32,
            n as f32,
        ];
        assert_eq!(got, want, "n={n}");
    }
}

/// The positional forms still build the same IR as the named forms they wrap.
#[test]
fn positional_and_named_forms_build_the_same_ir() {
    let build = |named: bool| {
        KernelBuilder::new("same", Target::Sm90, 32)
            .build(|k| {
                let xs = k.tensor("x", F32);
                let n = k.scalar("n", I32);
                let out = k.tensor_mut("out", F32);
                let (a, b) = if named {
                    for_range_with(
                        c_i32(0),
                        n,
                        c_i32(1),
                        (c_f32(0.0), c_f32(1.0)),
                        |i, (a, b)| (a + xs.load(i), b * 2.0),
                    )
                } else {
                    let r = for_range(c_i32(0), n, c_i32(1), &[c_f32(0.0), c_f32(1.0)], |i, c| {
                        vec![c[0] + xs.load(i), c[1] * 2.0]
                    });
                    (r[0], r[1])
                };
                let v = if named {
                    if_then_else(a.lt(b), || a, || b)
                } else {
                    if_else(a.lt(b), || vec![a], || vec![b])[0]
                };
                out.store(0, v);
            })
            .unwrap()
    };
    let (p, q) = (build(false), build(true));
    assert_eq!(ir::to_bytes(&p), ir::to_bytes(&q));
    assert_eq!(
        flydsl_codegen::lower(&p).unwrap(),
        flydsl_codegen::lower(&q).unwrap()
    );
}

/// A body that changes the state's shape or types is a verifier error naming the loop's line.
#[test]
fn state_mismatches_are_errors_naming_the_line() {
    let line = std::cell::Cell::new(0);
    let e = KernelBuilder::new("bad_len", Target::Gfx942, 64)
        .build(|k| {
            let n = k.scalar("n", I32);
            line.set(line!() + 1);
            let s = for_range_with(0, n, 1, vec![c_f32(0.0)], |_, s| vec![s[0], s[0]]);
            k.tensor_mut("out", F32).store(0, s[0]);
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("{}:{}:", file!(), line.get())) && e.contains("Yield"),
        "{e}"
    );
    let e = KernelBuilder::new("bad_ty", Target::Gfx942, 64)
        .build(|k| {
            let t = thread_id_x();
            line.set(line!() + 1);
            let v = if_then_else(t.lt(3), || c_f32(1.0), || c_i32(2));
            k.tensor_mut("out", F32).store(0, v);
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("{}:{}:", file!(), line.get())) && e.contains("Yield"),
        "{e}"
    );
    // Typed: entering the typed world with the wrong type names the line.
    let e = KernelBuilder::new("bad_typed", Target::Gfx942, 64)
        .build(|_| {
            line.set(line!() + 1);
            let _: Typed<i64> = thread_id_x().typed();
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("{}:{}:", file!(), line.get())) && e.contains("i64"),
        "{e}"
    );
}
