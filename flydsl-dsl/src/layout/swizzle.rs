//! XOR swizzles of offsets and swizzled (composed) layouts.

use std::fmt;

use super::base::Layout;
use super::coord::Coord;
use super::error::LayoutError;
use super::expr;
use super::IndexExpr;

/// CuTe's `Swizzle<B, M, S>`: `y = x ^ ((x & yyy) >> S)` where `yyy` selects the `B` bits
/// starting at bit `M + max(S, 0)` (a negative `S` shifts left). With `|S| >= B` it is its
/// own inverse and a bijection on every aligned block of `2^(M + B + |S|)` offsets.
///
/// ```
/// use flydsl_dsl::layout::Swizzle;
/// let sw = Swizzle::new(3, 4, 3)?; // the 128-byte-row swizzle of CuTe's SM80 GEMMs
/// assert_eq!(sw.apply(&0x80i64), 0x90);
/// assert_eq!(sw.apply(&sw.apply(&0x1234i64)), 0x1234);
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Swizzle {
    bits: u32,
    base: u32,
    shift: i32,
}

impl Swizzle {
    /// `Swizzle<bits, base, shift>`. Needs `|shift| >= bits` (else the swizzle is not an
    /// involution) and `bits + base + |shift| <= 62`.
    ///
    /// ```
    /// use flydsl_dsl::layout::Swizzle;
    /// assert!(Swizzle::new(2, 0, 3).is_ok());
    /// assert!(Swizzle::new(3, 0, 2).is_err());
    /// ```
    pub fn new(bits: u32, base: u32, shift: i32) -> Result<Self, LayoutError> {
        let span = u64::from(bits) + u64::from(base) + u64::from(shift.unsigned_abs());
        if span > 62 {
            return Err(LayoutError::BadArgument {
                what: "swizzle bits + base + |shift|",
                value: i64::try_from(span).unwrap_or(i64::MAX),
                fix: "the swizzled bits must lie below bit 62",
            });
        }
        if bits > 0 && shift.unsigned_abs() < bits {
            return Err(LayoutError::BadArgument {
                what: "swizzle |shift|",
                value: i64::from(shift),
                fix: "|shift| must be >= bits so the source and target bits do not overlap",
            });
        }
        Ok(Swizzle { bits, base, shift })
    }

    /// The identity swizzle `Swizzle<0,0,0>`.
    ///
    /// ```
    /// use flydsl_dsl::layout::Swizzle;
    /// assert_eq!(Swizzle::identity().apply(&77i64), 77);
    /// ```
    pub fn identity() -> Self {
        Swizzle {
            bits: 0,
            base: 0,
            shift: 0,
        }
    }

    /// `B`: number of bits XOR-ed.
    ///
    /// ```
    /// use flydsl_dsl::layout::Swizzle;
    /// assert_eq!(Swizzle::new(3, 4, 3)?.bits(), 3);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// `M`: the lowest bit that is changed (offsets keep their low `M` bits).
    ///
    /// ```
    /// use flydsl_dsl::layout::Swizzle;
    /// assert_eq!(Swizzle::new(3, 4, 3)?.base(), 4);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn base(&self) -> u32 {
        self.base
    }

    /// `S`: distance from the source bits down to the target bits.
    ///
    /// ```
    /// use flydsl_dsl::layout::Swizzle;
    /// assert_eq!(Swizzle::new(3, 4, 3)?.shift(), 3);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn shift(&self) -> i32 {
        self.shift
    }

    /// `2^(M + B + |S|)`: the size of the aligned blocks the swizzle permutes.
    ///
    /// ```
    /// use flydsl_dsl::layout::Swizzle;
    /// assert_eq!(Swizzle::new(3, 4, 3)?.period(), 1024);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn period(&self) -> i64 {
        1i64 << (self.base + self.bits + self.shift.unsigned_abs())
    }

    /// The swizzled offset of a non-negative `offset` (literal or run-time).
    ///
    /// ```
    /// use flydsl_dsl::layout::Swizzle;
    /// let sw = Swizzle::new(2, 0, 2)?;
    /// let row1: Vec<i64> = (4..8).map(|x| sw.apply(&x)).collect();
    /// assert_eq!(row1, vec![5, 4, 7, 6]);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn apply<I: IndexExpr>(&self, offset: &I) -> I {
        if self.bits == 0 {
            return offset.clone();
        }
        let mask = ((1i64 << self.bits) - 1) << (self.base + self.shift.max(0).unsigned_abs());
        let src = expr::and(offset, mask);
        let moved = if self.shift >= 0 {
            expr::shr(&src, self.shift.unsigned_abs())
        } else {
            expr::mul(&src, 1i64 << self.shift.unsigned_abs())
        };
        expr::xor(offset, &moved)
    }
}

impl fmt::Display for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sw<{},{},{}>", self.bits, self.base, self.shift)
    }
}

/// A swizzle applied after a layout: `offset = swizzle(layout(c))` (CuTe's
/// `ComposedLayout<Swizzle, 0, Layout>`).
///
/// ```
/// use flydsl_dsl::layout::{ComposedLayout, Layout, Swizzle};
/// let l = ComposedLayout::new(Swizzle::new(2, 0, 2)?, Layout::row_major((4, 4))?);
/// assert_eq!(l.to_string(), "Sw<2,0,2> o (4,4):(4,1)");
/// assert_eq!(l.call(&1i64)?, 5); // (1,0) -> 4 -> 4 ^ 1
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ComposedLayout {
    swizzle: Swizzle,
    layout: Layout,
}

/// Another name for [`ComposedLayout`].
///
/// ```
/// use flydsl_dsl::layout::{Layout, Swizzle, SwizzledLayout};
/// let l = SwizzledLayout::new(Swizzle::identity(), Layout::col_major(8)?);
/// assert_eq!(l.call(&3i64)?, 3);
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub type SwizzledLayout = ComposedLayout;

impl ComposedLayout {
    /// `swizzle o layout`.
    ///
    /// ```
    /// use flydsl_dsl::layout::{ComposedLayout, Layout, Swizzle};
    /// let l = ComposedLayout::new(Swizzle::new(3, 3, 3)?, Layout::row_major((8, 64))?);
    /// assert_eq!(l.size(), 512);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn new(swizzle: Swizzle, layout: Layout) -> Self {
        ComposedLayout { swizzle, layout }
    }

    /// The swizzle.
    ///
    /// ```
    /// use flydsl_dsl::layout::{ComposedLayout, Layout, Swizzle};
    /// let l = ComposedLayout::new(Swizzle::identity(), Layout::col_major(4)?);
    /// assert_eq!(l.swizzle(), Swizzle::identity());
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn swizzle(&self) -> Swizzle {
        self.swizzle
    }

    /// The inner layout.
    ///
    /// ```
    /// use flydsl_dsl::layout::{ComposedLayout, Layout, Swizzle};
    /// let l = ComposedLayout::new(Swizzle::identity(), Layout::col_major(4)?);
    /// assert_eq!(l.layout().size(), 4);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Size of the domain (the inner layout's size).
    ///
    /// ```
    /// use flydsl_dsl::layout::{ComposedLayout, Layout, Swizzle};
    /// let l = ComposedLayout::new(Swizzle::identity(), Layout::col_major((4, 2))?);
    /// assert_eq!(l.size(), 8);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn size(&self) -> i64 {
        self.layout.size()
    }

    /// `swizzle(layout.crd2idx(crd))`.
    ///
    /// ```
    /// use flydsl_dsl::layout::{ComposedLayout, Coord, Layout, Swizzle};
    /// use flydsl_dsl::tup;
    /// let l = ComposedLayout::new(Swizzle::new(2, 0, 2)?, Layout::row_major((4, 4))?);
    /// assert_eq!(l.crd2idx(&Coord::from(tup![3, 1]))?, 12 + (1 ^ 3));
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn crd2idx<I: IndexExpr>(&self, crd: &Coord<I>) -> Result<I, LayoutError> {
        Ok(self.swizzle.apply(&self.layout.crd2idx(crd)?))
    }

    /// `swizzle(layout(i))`.
    ///
    /// ```
    /// use flydsl_dsl::layout::{ComposedLayout, Layout, Swizzle};
    /// let l = ComposedLayout::new(Swizzle::new(1, 0, 1)?, Layout::col_major(4)?);
    /// let v: Vec<i64> = (0..4).map(|i| l.call(&i)).collect::<Result<_, _>>()?;
    /// assert_eq!(v, vec![0, 1, 3, 2]);
    /// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
    /// ```
    pub fn call<I: IndexExpr>(&self, i: &I) -> Result<I, LayoutError> {
        Ok(self.swizzle.apply(&self.layout.call(i)?))
    }
}

impl fmt::Display for ComposedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} o {}", self.swizzle, self.layout)
    }
}

/// FlyDSL's LDS bank-conflict swizzle at 16-byte granularity, used by its GEMM kernels on
/// both the store and the load path: `col_bytes ^ ((row % k_blocks16) * 16)`, where
/// `k_blocks16` is the number of 16-byte blocks in a row of the tile. For a power-of-two
/// `k_blocks16` and row pitch this equals a [`Swizzle`] with base 4 on the linear offset.
///
/// ```
/// use flydsl_dsl::layout::swizzle_xor16;
/// assert_eq!(swizzle_xor16(&3i64, &0i64, 4)?, 48);
/// assert_eq!(swizzle_xor16(&5i64, &16i64, 4)?, 0);
/// assert!(swizzle_xor16(&5i64, &16i64, 0).is_err());
/// # Ok::<(), flydsl_dsl::layout::LayoutError>(())
/// ```
pub fn swizzle_xor16<I: IndexExpr>(
    row: &I,
    col_bytes: &I,
    k_blocks16: i64,
) -> Result<I, LayoutError> {
    if k_blocks16 < 1 {
        return Err(LayoutError::BadArgument {
            what: "k_blocks16",
            value: k_blocks16,
            fix: "the number of 16-byte blocks per LDS row must be >= 1",
        });
    }
    let blk = expr::rem(row, k_blocks16);
    Ok(expr::xor(col_bytes, &expr::mul(&blk, 16)))
}

/// FlyDSL's fp8 128-byte-row LDS swizzle: `col_bytes ^ (((row % 16) / 2) * 16)`.
///
/// ```
/// use flydsl_dsl::layout::swizzle_fp8_128;
/// assert_eq!(swizzle_fp8_128(&3i64, &0i64), 16);
/// assert_eq!(swizzle_fp8_128(&17i64, &0i64), 0);
/// ```
pub fn swizzle_fp8_128<I: IndexExpr>(row: &I, col_bytes: &I) -> I {
    let blk = expr::div(&expr::rem(row, 16), 2);
    expr::xor(col_bytes, &expr::mul(&blk, 16))
}
