//! The custom all-reduce on several Sim devices of one process (one thread per rank), with
//! memcheck, racecheck and initcheck on: the issue's shapes (scaled where the Sim would be
//! slow), odd element counts (the scalar tail), every dtype, world sizes 2, 4 and 8, both
//! algorithms, in place and out of place, and that both algorithms give the same bits.

mod common;

use common::check_all_reduce;
use fly_comm::Algorithm;
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::Target;

#[test]
fn one_stage_issue_shapes_ws2() {
    // The issue's shapes.
    for (m, n) in [(2usize, 7168usize), (16, 4096), (128, 8192), (1024, 8192)] {
        check_all_reduce::<f16>(2, Target::Sm90, m * n, Some(Algorithm::OneStage), false);
    }
}

#[test]
fn every_dtype_both_algorithms_ws4_agree_bitwise() {
    let n = 3 * 2048 + 40; // 16-byte packs not a multiple of the grid's threads
    let a = check_all_reduce::<f32>(4, Target::Sm90, n, Some(Algorithm::OneStage), false);
    let b = check_all_reduce::<f32>(4, Target::Sm90, n, Some(Algorithm::TwoStage), false);
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    check_all_reduce::<f16>(4, Target::Gfx942, n, Some(Algorithm::TwoStage), false);
    check_all_reduce::<bf16>(4, Target::Gfx950, n, Some(Algorithm::TwoStage), false);
    check_all_reduce::<bf16>(4, Target::Gfx942, n, Some(Algorithm::OneStage), true);
}

#[test]
fn odd_element_counts_take_the_scalar_tail() {
    // Byte counts that are no multiple of 16: the tail past the last whole pack is reduced
    // element by element (not an error), on both algorithms.
    for n in [1usize, 7, 13, 1001] {
        check_all_reduce::<f16>(2, Target::Sm90, n, Some(Algorithm::OneStage), false);
        check_all_reduce::<f32>(2, Target::Gfx942, n, None, true);
    }
    check_all_reduce::<bf16>(
        4,
        Target::Sm90,
        4 * 8 * 3 + 5,
        Some(Algorithm::TwoStage),
        false,
    );
}

#[test]
fn world_size_8() {
    check_all_reduce::<bf16>(8, Target::Sm90, 2 * 7168, Some(Algorithm::OneStage), false);
    check_all_reduce::<f16>(
        8,
        Target::Gfx942,
        8 * 64 + 3,
        Some(Algorithm::TwoStage),
        true,
    );
}
