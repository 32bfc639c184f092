//! The README's "Adding a kernel" example cannot rot: its code block must be exactly the
//! compiled `flydsl_devtools::proof::tile_gemm` source (between the `README:begin` /
//! `README:end` markers of `flydsl-devtools/src/proof/readme.rs`), and that kernel must
//! compute `A · Bᵀ` exactly on the Sim for every target at ragged sizes.

use flydsl_dsl::ir::{Kernel, MmaAtom, Target};
use flydsl_dsl::tile::TiledMma;
use flydsl_sim::{SimMemory, SimOptions};
use flydsl_testutil::rng::Rng;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn readme_block_is_the_compiled_example() {
    let src = std::fs::read_to_string(root().join("flydsl-devtools/src/proof/readme.rs")).unwrap();
    let body = src
        .split("// README:begin\n")
        .nth(1)
        .and_then(|s| s.split("// README:end").next())
        .expect("the markers")
        .trim_end();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## Adding a kernel")
        .nth(1)
        .expect("the README has an \"Adding a kernel\" section");
    let block = section
        .split("```rust\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a rust code block in the section");
    // The README indents the block by 3 spaces (it sits in a numbered list).
    let block: Vec<&str> = block
        .lines()
        .map(|l| l.strip_prefix("   ").unwrap_or(l))
        .collect();
    let block = block.join("\n");
    assert_eq!(
        block.trim_end(),
        body,
        "README.md's example differs from flydsl-devtools/src/proof/readme.rs: copy the \
         text between the markers into the README"
    );
}

fn kernarg(k: &Kernel, args: &[u64]) -> Vec<u8> {
    let layout = k.kernarg_layout();
    let mut buf = vec![0u8; layout.size as usize];
    for s in &layout.slots {
        let o = s.offset as usize;
        buf[o..o + s.size as usize]
            .copy_from_slice(&args[s.param].to_le_bytes()[..s.size as usize]);
    }
    buf
}

/// bf16 bits of small integers (exact products and sums in f32).
fn bf16(x: i32) -> u16 {
    ((x as f32).to_bits() >> 16) as u16
}

#[test]
fn example_gemm_is_exact_on_every_target() {
    let mut rng = Rng::new(31);
    for t in Target::ALL {
        let k = flydsl_devtools::proof::tile_gemm(t).unwrap();
        let mma = TiledMma::new(MmaAtom::native_16bit(t, true), t, (2, 2), (2, 2)).unwrap();
        let (bm, bn) = (mma.tile_m() as usize, mma.tile_n() as usize);
        for (m, n, kd) in [(bm, bn, 32usize), (bm + 5, 2 * bn - 3, 72), (3, 7, 8)] {
            let a: Vec<i32> = (0..m * kd)
                .map(|_| (rng.next_u64() % 7) as i32 - 3)
                .collect();
            let b: Vec<i32> = (0..n * kd)
                .map(|_| (rng.next_u64() % 7) as i32 - 3)
                .collect();
            let mem = SimMemory::new();
            let up = |v: &[i32]| {
                let bytes: Vec<u8> = v.iter().flat_map(|&x| bf16(x).to_le_bytes()).collect();
                let at = mem.alloc(bytes.len() as u64).unwrap();
                mem.write(at, &bytes).unwrap();
                at
            };
            let (pa, pb) = (up(&a), up(&b));
            let pc = mem.alloc((m * n * 4) as u64).unwrap();
            let args = kernarg(&k, &[m as u64, n as u64, kd as u64, pa, pb, pc]);
            let grid = [m.div_ceil(bm) as u32, n.div_ceil(bn) as u32, 1];
            flydsl_sim::launch(
                &k,
                grid,
                [mma.threads(), 1, 1],
                &args,
                &mem,
                &SimOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{t} {m}x{n}x{kd}: {e}"));
            let mut out = vec![0u8; m * n * 4];
            mem.read(pc, &mut out).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let want: i32 = (0..kd).map(|q| a[i * kd + q] * b[j * kd + q]).sum();
                    let o = (i * n + j) * 4;
                    let got = f32::from_le_bytes(out[o..o + 4].try_into().unwrap());
                    assert_eq!(got, want as f32, "{t} {m}x{n}x{kd}: C[{i}][{j}]");
                }
            }
        }
    }
}
