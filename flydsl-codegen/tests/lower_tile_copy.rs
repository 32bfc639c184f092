//! The tile layer's asynchronous copy atoms compiled with llc-22 and the machine code
//! checked: AMD direct-to-LDS ([`CopyAtom::DirectToLds`] / `DirectToLds32`) becomes
//! `buffer_load_dwordx4 ... lds` / `buffer_load_dword ... lds` with no LDS store of the
//! data, and the sm_90a [`TmaCopy`] becomes `cp.async.bulk.tensor` with its
//! `mbarrier.arrive.expect_tx`. Their Sim semantics are tested in flydsl-tests'
//! `tile_copy_atoms`.

mod common_lower;
use common_lower::*;
use flydsl_dsl::ir::{Kernel, ScalarType, Target};
use flydsl_dsl::tile::*;
use flydsl_dsl::*;

fn direct(target: Target, atom: CopyAtom) -> Kernel {
    KernelBuilder::new("direct", target, 64)
        .build(|k| {
            let a = k.tensor("a", ScalarType::BF16);
            let (m, n) = (
                k.scalar("m", ScalarType::I32),
                k.scalar("n", ScalarType::I32),
            );
            let out = k.tensor_mut("out", ScalarType::BF16);
            let lay = smem_row_major(32, 64).unwrap();
            let s = STensor::new(k.lds("s", ScalarType::BF16, 32 * 64), lay, 1).unwrap();
            let g = GTensor::new(a, m, n).local_tile((32, 64), (block_id_x(), c_i32(0)));
            let tc = TiledCopy::new(atom, ScalarType::BF16, 64, (32, 64)).unwrap();
            let v = s.stage(c_i32(0));
            copy(&tc.partition(thread_id_x()), &g, &v);
            barrier();
            let t = thread_id_x();
            out.store(t, v.load(Idx::Dyn(t / 64), Idx::Dyn(t % 64), 1));
        })
        .unwrap()
}

fn lines_with<'a>(asm: &'a str, what: &str) -> Vec<&'a str> {
    asm.lines().filter(|l| l.contains(what)).collect()
}

#[test]
fn direct_to_lds_copies_are_buffer_loads_to_lds() {
    let Some(tools) = tools() else { return };
    for (target, atom, inst, per_thread) in [
        (
            Target::Gfx950,
            CopyAtom::DirectToLds,
            "buffer_load_dwordx4",
            4,
        ),
        (
            Target::Gfx950,
            CopyAtom::DirectToLds32,
            "buffer_load_dword ",
            16,
        ),
        (
            Target::Gfx942,
            CopyAtom::DirectToLds32,
            "buffer_load_dword ",
            16,
        ),
    ] {
        let c = compile(&tools, &direct(target, atom));
        let to_lds: Vec<&str> = lines_with(&c.asm, inst)
            .into_iter()
            .filter(|l| l.trim_end().ends_with(" lds") || l.contains(" lds "))
            .collect();
        // 32 x 64 bf16 over 64 threads: 4 accesses of 16 bytes or 16 of 4 bytes each.
        assert_eq!(to_lds.len(), per_thread, "{target} {atom:?}:\n{}", c.asm);
        assert!(
            lines_with(&c.asm, "ds_write").is_empty() && lines_with(&c.asm, "ds_store").is_empty(),
            "{target} {atom:?}: the data went through registers\n{}",
            c.asm
        );
    }
}

#[test]
fn tma_copy_is_cp_async_bulk_tensor() {
    let Some(tools) = tools() else { return };
    let k = KernelBuilder::new("tma", Target::Sm90, 128)
        .build(|k| {
            let map = k.tensor("a_map", ScalarType::I8);
            let out = k.tensor_mut("out", ScalarType::BF16);
            let bar = k.lds("bar", ScalarType::I64, 1);
            let tma = TmaCopy::new(ScalarType::BF16, (64, 64)).unwrap();
            let s = STensor::new(
                k.lds_aligned("s", ScalarType::BF16, 64 * 64, 1024),
                tma.layout(),
                1,
            )
            .unwrap();
            let t = thread_id_x();
            if_(t.eq(0), || nv::mbar_init(bar.ptr(), 1));
            barrier();
            let v = s.stage(c_i32(0));
            if_(t.eq(0), || {
                tma.issue(map.ptr(), &v, bar.ptr(), (block_id_x() * 64, c_i32(0)))
            });
            nv::mbar_wait(bar.ptr(), c_i32(0));
            out.store(t, v.load(Idx::Dyn(t / 64), Idx::Dyn(t % 64), 1));
        })
        .unwrap();
    let c = compile(&tools, &k);
    assert_eq!(
        lines_with(&c.asm, "cp.async.bulk.tensor.2d").len(),
        1,
        "{}",
        c.asm
    );
    assert_eq!(
        lines_with(&c.asm, "mbarrier.arrive.expect_tx").len(),
        1,
        "{}",
        c.asm
    );
    assert!(
        c.asm.contains(&format!("{}", 64 * 64 * 2)),
        "the box bytes\n{}",
        c.asm
    );
}

#[test]
fn tdm_copy_is_tensor_load_to_lds_with_its_wait() {
    let Some(tools) = tools() else { return };
    let k = KernelBuilder::new("tdm", Target::Gfx1250, 64)
        .build(|k| {
            let desc = k.tensor("a_desc", ScalarType::I32);
            let out = k.tensor_mut("out", ScalarType::BF16);
            let tdm = TdmCopy::new(ScalarType::BF16, (32, 64)).unwrap();
            let s = STensor::new(k.lds("s", ScalarType::BF16, 32 * 64), tdm.layout(), 1).unwrap();
            let v = s.stage(c_i32(0));
            let t = thread_id_x();
            if_((t / 32).eq(0), || {
                tdm.issue(desc, &v, (block_id_x() * 32, c_i32(0)));
                wait_tensorcnt(0);
            });
            barrier();
            out.store(t, v.load(Idx::Dyn(t / 64), Idx::Dyn(t % 64), 1));
        })
        .unwrap();
    let c = compile(&tools, &k);
    assert_eq!(
        lines_with(&c.asm, "tensor_load_to_lds ").len(),
        1,
        "{}",
        c.asm
    );
    assert!(
        !lines_with(&c.asm, "s_wait_tensorcnt 0x0").is_empty(),
        "{}",
        c.asm
    );
    assert!(
        lines_with(&c.asm, "ds_store").is_empty(),
        "the tile went through registers\n{}",
        c.asm
    );
}
