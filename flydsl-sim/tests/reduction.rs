//! Block reduction: per-thread strided partial sums, wave reduction with Shuffle Xor, wave
//! partials through LDS and a barrier, final sum by wave 0.

mod common;
use common::*;
use flydsl_ir::*;
use flydsl_sim::{launch, SimMemory, SimOptions};

fn block_sum(target: Target, block: u32) -> Kernel {
    let ws = target.wave_size() as i32;
    let nwaves = (block as i32 + ws - 1) / ws;
    let mut b = B::new("block_sum", target);
    let (px, _) = b.tensor("x", ScalarType::F32);
    let (py, _) = b.tensor("y", ScalarType::F32);
    let n = b.scalar("n", ScalarType::I32);
    let part = b.lds("partials", ScalarType::F32, nwaves as u32);
    let t = b.tid();
    let bd = b.special(Special::BlockDim(Dim::X));
    let z = b.f32(0.0);
    let acc = b.for_(t, n, bd, vec![z], |b, i, c| {
        let x = b.load(px, i, F32);
        vec![b.bin(BinOp::Add, c[0], x)]
    })[0];
    // Wave reduction (butterfly).
    let mut v = acc;
    let mut off = ws / 2;
    while off > 0 {
        let o = b.i32(off);
        let s = b.shuffle(ShuffleMode::Xor, v, o);
        v = b.bin(BinOp::Add, v, s);
        off /= 2;
    }
    let lane = b.special(Special::LaneId);
    let wsc = b.i32(ws);
    let wave = b.bin(BinOp::Div, t, wsc);
    let zero = b.i32(0);
    let is_lane0 = b.cmp(CmpPred::Eq, lane, zero);
    let lds = b.lds_base(part);
    b.when(is_lane0, |b| b.store(lds, wave, v));
    b.barrier();
    let is_t0 = b.cmp(CmpPred::Eq, t, zero);
    b.when(is_t0, |b| {
        let z = b.f32(0.0);
        let nw = b.i32(nwaves);
        let one = b.i32(1);
        let zero = b.i32(0);
        let s = b.for_(zero, nw, one, vec![z], |b, w, c| {
            let p = b.load(lds, w, F32);
            vec![b.bin(BinOp::Add, c[0], p)]
        })[0];
        b.store(py, zero, s);
    });
    b.finish()
}

#[test]
fn block_reduction_wave64_and_wave32() {
    let x: Vec<f32> = (0..1000).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
    let want: f32 = x.iter().sum(); // small integers: exact in any order
    for target in [
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1201,
        Target::Gfx1250,
        Target::Sm90,
    ] {
        for block in [256u32, 64] {
            let k = block_sum(target, block);
            let mem = SimMemory::new();
            let dx = upload_f32(&mem, &x);
            let dy = upload_f32(&mem, &[f32::NAN]);
            let args = [Arg::Tensor(dx, 1000), Arg::Tensor(dy, 1), Arg::I32(1000)];
            launch(
                &k,
                [1, 1, 1],
                [block, 1, 1],
                &pack(&k, &args),
                &mem,
                &SimOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{target} block {block}: {e}"));
            assert_eq!(download_f32(&mem, dy, 1)[0], want, "{target} block {block}");
        }
    }
}
