//! Unit tests: the worked examples of CuTe's layout-algebra documentation
//! (NVIDIA/cutlass `media/docs/cpp/cute/02_layout_algebra.md`) and error cases.

use super::*;

type R = Result<(), LayoutError>;

fn l(shape: impl Into<IntTuple>, stride: impl Into<IntTuple>) -> Layout {
    Layout::new(shape, stride).unwrap()
}

#[test]
fn display_and_constructors() -> R {
    assert_eq!(
        l((2, (3, 4)), (1, (2, 6))).to_string(),
        "(2,(3,4)):(1,(2,6))"
    );
    assert_eq!(Layout::col_major((2, (3, 4)))?, l((2, (3, 4)), (1, (2, 6))));
    assert_eq!(
        Layout::row_major((2, (3, 4)))?,
        l((2, (3, 4)), (12, (4, 1)))
    );
    assert_eq!(Layout::col_major(5)?.to_string(), "5:1");
    assert_eq!(tup![2, (3, 4)], IntTuple::from((2, (3, 4))));
    assert_eq!(Layout::concat(&[])?.to_string(), "():()");
    Ok(())
}

#[test]
fn construction_errors() {
    assert!(matches!(
        Layout::new((2, 3), (1, (2, 3))),
        Err(LayoutError::Incongruent { .. })
    ));
    assert!(matches!(
        Layout::new((2, -3), (1, 2)),
        Err(LayoutError::BadShapeEntry { value: -3, .. })
    ));
    assert!(matches!(
        Layout::new((1i64 << 40, 1i64 << 40), (1, 1)),
        Err(LayoutError::Overflow { .. })
    ));
    assert!(matches!(
        Layout::col_major((4, 8)).unwrap().mode(2),
        Err(LayoutError::ModeOutOfRange {
            index: 2,
            rank: 2,
            ..
        })
    ));
}

#[test]
fn coordinate_errors() {
    let a = Layout::col_major((2, (3, 4))).unwrap();
    let bad = Coord::from(tup![1, 2, 3]);
    assert!(matches!(
        a.crd2idx(&bad),
        Err(LayoutError::CoordMismatch { .. })
    ));
    let deep = Coord::from(tup![(1, 0), (1, 1)]);
    assert!(matches!(
        a.crd2idx(&deep),
        Err(LayoutError::CoordMismatch { .. })
    ));
    let out = Coord::from(tup![1, 12]);
    assert!(matches!(
        a.crd2idx(&out),
        Err(LayoutError::CoordOutOfRange {
            value: 12,
            extent: 12,
            ..
        })
    ));
    assert!(a.call(&24i64).is_err());
}

#[test]
fn docs_coalesce() {
    // "Coalesce": (2,(1,6)):(1,(6,2)) -> 12:1; by mode -> (2,6):(1,2).
    let a = l((2, (1, 6)), (1, (6, 2)));
    assert_eq!(a.coalesce().to_string(), "12:1");
    assert_eq!(a.coalesce_modes().to_string(), "(2,6):(1,2)");
    assert_eq!(l((1, 1), (3, 4)).coalesce().to_string(), "1:0");
}

#[test]
fn docs_composition() -> R {
    // "Composition": (6,2):(8,2) o (4,3):(3,1) = ((2,2),3):((24,2),8).
    assert_eq!(
        composition(&l((6, 2), (8, 2)), l((4, 3), (3, 1)))?.to_string(),
        "((2,2),3):((24,2),8)"
    );
    // "Computing Composition": (3,6,2,8):(w,x,y,z) o 16:9 = (1,2,2,4):(9w,3x,y,z), coalesced.
    let (w, x, y, z) = (1000, 100, 10, 1);
    let r = composition(&l((3, 6, 2, 8), (w, x, y, z)), l(16, 9))?;
    assert_eq!(r, l((2, 2, 4), (3 * x, y, z)));
    // "Example 2": 20:2 o (5,4):(4,1) = (5,4):(8,2).
    assert_eq!(
        composition(&l(20, 2), l((5, 4), (4, 1)))?.to_string(),
        "(5,4):(8,2)"
    );
    // "Example 3": (10,2):(16,4) o (5,4):(1,5) = (5,(2,2)):(16,(80,4)).
    assert_eq!(
        composition(&l((10, 2), (16, 4)), l((5, 4), (1, 5)))?.to_string(),
        "(5,(2,2)):(16,(80,4))"
    );
    // "By-mode Composition": (12,(4,8)):(59,(13,1)) o <3:4, 8:2> = (3,(2,4)):(236,(26,1)),
    // and with the shape tiler (3,8): (3,(4,2)):(59,(13,1)).
    let a = l((12, (4, 8)), (59, (13, 1)));
    let t = Tiler::modes([l(3, 4), l(8, 2)]);
    assert_eq!(composition(&a, t)?.to_string(), "(3,(2,4)):(236,(26,1))");
    assert_eq!(
        composition(&a, Tiler::from_shape((3, 8))?)?.to_string(),
        "(3,(4,2)):(59,(13,1))"
    );
    Ok(())
}

#[test]
fn composition_errors() {
    // 6 does not divide the extent 4 of the first mode (shape divisibility).
    let a = l((4, 3), (1, 10));
    assert!(matches!(
        composition(&a, l((6, 2), (1, 6))),
        Err(LayoutError::ShapeDivisibility { .. })
    ));
    // Stride 3 vs extent 4 (stride divisibility), with a second mode so no relaxation.
    assert!(matches!(
        composition(&a, l((2, 2), (3, 1))),
        Err(LayoutError::StrideDivisibility { .. })
    ));
    // Exact 1-D relaxations: 3 elements inside the first mode.
    assert_eq!(composition(&a, l(3, 1)).unwrap().to_string(), "3:1");
    assert!(matches!(
        composition(&a, l(2, -1)),
        Err(LayoutError::NegativeStride { .. })
    ));
    let t = Tiler::modes([l(2, 1), l(2, 1), l(2, 1)]);
    assert!(matches!(
        composition(&a, t),
        Err(LayoutError::TilerRank { .. })
    ));
}

#[test]
fn docs_complement() -> R {
    // "Complement Examples".
    let cases = [
        (l(4, 1), "6:4"),
        (l(6, 4), "4:1"),
        (l((4, 6), (1, 4)), "1:0"),
        (l(4, 2), "(2,3):(1,8)"),
        (l((2, 4), (1, 6)), "3:2"),
        (l((2, 2), (1, 6)), "(3,2):(2,12)"),
    ];
    for (a, want) in cases {
        assert_eq!(complement(&a, 24)?.to_string(), want, "complement({a}, 24)");
    }
    assert!(matches!(
        complement(&l((2, 2), (1, 1)), 8),
        Err(LayoutError::NotComplementable { .. })
    ));
    assert!(complement(&l(4, 1), 0).is_err());
    assert!(complement(&l(4, -1), 8).is_err());
    Ok(())
}

#[test]
fn docs_divide() -> R {
    // "Logical Divide 1-D Example".
    let a = l((4, 2, 3), (2, 1, 8));
    assert_eq!(
        logical_divide(&a, l(4, 2))?.to_string(),
        "((2,2),(2,3)):((4,1),(2,8))"
    );
    // "Logical Divide 2-D Example" / "Zipped, Tiled, Flat Divides".
    let a = l((9, (4, 8)), (59, (13, 1)));
    let t = Tiler::modes([l(3, 3), l((2, 4), (1, 8))]);
    let ld = logical_divide(&a, &t)?;
    assert_eq!(ld.mode(0)?.shape(), &IntTuple::from((3, 3)));
    assert_eq!(ld.mode(1)?.size(), 32);
    assert_eq!(ld.mode(1)?.mode(0)?.size(), 8);
    let zd = zipped_divide(&a, &t)?;
    assert_eq!(zd.mode(0)?.to_string(), "(3,(2,4)):(177,(13,2))");
    assert_eq!(zd.mode(0)?, composition(&a, &t)?);
    assert_eq!(
        (zd.mode(1)?.mode(0)?.size(), zd.mode(1)?.mode(1)?.size()),
        (3, 4)
    );
    let td = tiled_divide(&a, &t)?;
    assert_eq!(td.rank(), 3);
    assert_eq!(td.mode(0)?, zd.mode(0)?);
    let fd = flat_divide(&a, &t)?;
    assert_eq!(fd.rank(), 4);
    Ok(())
}

#[test]
fn docs_product() -> R {
    // "Logical Product 1-D Example".
    let a = l((2, 2), (4, 1));
    assert_eq!(complement(&a, 24)?.to_string(), "(2,3):(2,8)");
    assert_eq!(
        logical_product(&a, l(6, 1))?.to_string(),
        "((2,2),(2,3)):((4,1),(2,8))"
    );
    // "Blocked and Raked Products": 2x5 row-major block, 3x4 column-major arrangement.
    let (a, b) = (l((2, 5), (5, 1)), l((3, 4), (1, 3)));
    assert_eq!(blocked_product(&a, &b)?.to_string(), "(6,(5,4)):(5,(1,30))");
    assert_eq!(
        raked_product(&a, &b)?.to_string(),
        "((3,2),(4,5)):((10,5),(30,1))"
    );
    // Rank padding: a rank-1 block in a rank-2 arrangement.
    let p = blocked_product(&l((4,), (1,)), &Layout::col_major((2, 3))?)?;
    assert_eq!(p.to_string(), "(8,3):(1,8)");
    Ok(())
}

#[test]
fn inverses() -> R {
    assert_eq!(right_inverse(&l(4, 2))?.to_string(), "1:0");
    assert_eq!(
        right_inverse(&l((4, 8), (8, 1)))?.to_string(),
        "(8,4):(4,1)"
    );
    let li = left_inverse(&l(4, 2))?;
    for i in 0..4i64 {
        assert_eq!(li.call(&(2 * i))?, i);
    }
    assert!(left_inverse(&l((2, 2), (1, 1))).is_err());
    Ok(())
}

#[test]
fn swizzles() -> R {
    let sw = Swizzle::new(3, 4, 3)?;
    assert_eq!(sw.to_string(), "Sw<3,4,3>");
    assert_eq!(sw.apply(&0x80i64), 0x90);
    // Negative shift moves the high bits up instead.
    let up = Swizzle::new(2, 0, -3)?;
    assert_eq!(up.apply(&0b11i64), 0b11011);
    assert!(Swizzle::new(40, 20, 40).is_err());
    Ok(())
}

#[test]
fn i64_index_expr() {
    assert_eq!(IndexExpr::div_lit(&17i64, 5), 3);
    assert_eq!(IndexExpr::rem_lit(&17i64, 5), 2);
    assert_eq!(IndexExpr::shr_lit(&17i64, 70), 0);
    assert_eq!(IndexExpr::and_lit(&0b1011i64, 0b10), 0b10);
    assert_eq!(<i64 as IndexExpr>::lit(4).as_lit(), Some(4));
}
