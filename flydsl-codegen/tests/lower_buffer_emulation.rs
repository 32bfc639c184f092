//! The NVPTX buffer-resource emulation is exact: a load whose whole access lies in
//! [0, num_elems) reads memory, any other reads zero; out-of-range stores are dropped. The
//! sm_90 lowering of the test kernel uses no GPU intrinsic, so it runs on the host (lli-22).

mod common_lower;
use common_lower::*;
use flydsl_ir::*;
use std::process::Command;

use ScalarType::*;

/// For i in -8..24: s[i+8] = buf(x)[i]; v[4(i+8)..] = buf(x)[i..i+4]; buf(y)[i] = i.
fn kernel() -> Kernel {
    let mut b = KB::new("bufemu", Target::Sm90);
    let (x, nx) = b.tensor("x", F32, false);
    let (y, ny) = b.tensor("y", F32, true);
    let (s, _) = b.tensor("s", F32, true);
    let (v, _) = b.tensor("v", F32, true);
    let rx = b.op(
        OpKind::MakeRsrc {
            ptr: x,
            num_elems: nx,
        },
        Type::BufferRsrc(F32),
    );
    let ry = b.op(
        OpKind::MakeRsrc {
            ptr: y,
            num_elems: ny,
        },
        Type::BufferRsrc(F32),
    );
    let lo = b.i32(-8);
    let hi = b.i32(24);
    let one = b.i32(1);
    b.for_(lo, hi, one, &[], |b, i, _| {
        let eight = b.i32(8);
        let four = b.i32(4);
        let at = b.op(OpKind::Binary(BinOp::Add, i, eight), Type::s(I32));
        let at4 = b.op(OpKind::Binary(BinOp::Mul, at, four), Type::s(I32));
        let e = b.op(
            OpKind::BufferLoad {
                rsrc: rx,
                index: i,
                flags: MemFlags::default(),
            },
            Type::s(F32),
        );
        b.op0(OpKind::Store {
            ptr: s,
            index: at,
            value: e,
            flags: MemFlags::default(),
        });
        let e4 = b.op(
            OpKind::BufferLoad {
                rsrc: rx,
                index: i,
                flags: MemFlags::default(),
            },
            Type::vec(F32, 4),
        );
        b.op0(OpKind::Store {
            ptr: v,
            index: at4,
            value: e4,
            flags: MemFlags::default(),
        });
        let fi = b.op(OpKind::Cast(CastKind::Convert, i), Type::s(F32));
        b.op0(OpKind::BufferStore {
            rsrc: ry,
            index: i,
            value: fi,
            flags: MemFlags::default(),
        });
        vec![]
    });
    b.finish()
}

#[test]
fn nvptx_buffer_emulation_matches_the_bounds_rule() {
    let Some(t) = tools() else { return };
    // It compiles for every target (native buffers on AMD).
    for target in Target::ALL {
        let mut k = kernel();
        k.target = target;
        let c = compile(&t, &k);
        if target.is_amd() {
            check_amd_object(&k, &c);
        }
    }
    let lli = ["/usr/bin/lli-22", "/usr/lib/llvm-22/bin/lli"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .expect("lli-22 next to llc-22");
    let ir = flydsl_codegen::lower(&kernel()).unwrap();
    let mut prog: String = ir
        .lines()
        .filter(|l| !l.starts_with("target ") && !l.starts_with('!'))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace(" addrspace(1)", "");
    // x holds 1..=16 but only 13 elements are valid; y has room for 32 but 10 are valid.
    let xs: Vec<String> = (1..=16).map(|i| format!("float {:.1}", i as f32)).collect();
    prog.push_str(&format!(
        "@x = global [16 x float] [{}]\n\
         @y = global [32 x float] zeroinitializer\n\
         @s = global [32 x float] zeroinitializer\n\
         @v = global [128 x float] zeroinitializer\n\
         declare i64 @write(i32, ptr, i64)\n\
         define i32 @main() {{\n\
           call void @bufemu(ptr @x, i64 13, ptr @y, i64 10, ptr @s, i64 32, ptr @v, i64 128)\n\
           call i64 @write(i32 1, ptr @y, i64 128)\n\
           call i64 @write(i32 1, ptr @s, i64 128)\n\
           call i64 @write(i32 1, ptr @v, i64 512)\n\
           ret i32 0\n\
         }}\n",
        xs.join(", ")
    ));
    let dir = std::env::temp_dir().join(format!("flydsl-lower-bufemu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ll = dir.join("host.ll");
    std::fs::write(&ll, &prog).unwrap();
    let out = Command::new(&lli).arg(&ll).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "lli: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f: Vec<f32> = out
        .stdout
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let (y, rest) = f.split_at(32);
    let (s, v) = rest.split_at(32);
    let x_at = |i: i32| {
        if (0..13).contains(&i) {
            (i + 1) as f32
        } else {
            0.0
        }
    };
    for i in -8..24i32 {
        let at = (i + 8) as usize;
        assert_eq!(s[at], x_at(i), "scalar load at {i}");
        let whole = i >= 0 && i + 4 <= 13;
        for l in 0..4 {
            let want = if whole { x_at(i + l) } else { 0.0 };
            assert_eq!(v[4 * at + l as usize], want, "vector load at {i} lane {l}");
        }
    }
    for (j, &yj) in y.iter().enumerate() {
        let want = if j < 10 { j as f32 } else { 0.0 };
        assert_eq!(yj, want, "y[{j}]");
    }
}
