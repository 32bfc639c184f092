//! Nested integer tuples: the shapes and strides of layouts.

use std::fmt;

/// A nested tuple of integers: either one integer or a tuple of nested tuples. CuTe's
/// `IntTuple`; shapes and strides are both `IntTuple`s.
///
/// Rust tuples, arrays and integers convert into it, so nested tuples are short to write:
///
/// ```
/// use flydsl_dsl::layout::IntTuple;
/// use flydsl_dsl::tup;
/// let t = IntTuple::from((2, (3, 4)));
/// assert_eq!(t, tup![2, (3, 4)]);
/// assert_eq!(t.to_string(), "(2,(3,4))");
/// assert_eq!(t.product(), 24);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IntTuple {
    /// One integer.
    Int(i64),
    /// A tuple of nested tuples.
    Tuple(Vec<IntTuple>),
}

/// A layout's shape (entries >= 1).
///
/// ```
/// use flydsl_dsl::layout::Shape;
/// let s: Shape = (4, 8).into();
/// assert_eq!(s.product(), 32);
/// ```
pub type Shape = IntTuple;

/// A layout's stride (congruent with its shape).
///
/// ```
/// use flydsl_dsl::layout::Stride;
/// let d: Stride = (1, 4).into();
/// assert_eq!(d.rank(), 2);
/// ```
pub type Stride = IntTuple;

/// Writes a nested [`IntTuple`] tersely: `tup![2, (3, 4)]` is `(2,(3,4))`. Elements are
/// expressions (integers, Rust tuples of integers, or `IntTuple`s).
///
/// ```
/// use flydsl_dsl::tup;
/// let n = 3;
/// assert_eq!(tup![2, (n, 4), n * 2].to_string(), "(2,(3,4),6)");
/// assert_eq!(tup![].to_string(), "()");
/// ```
#[macro_export]
macro_rules! tup {
    ($($e:expr),* $(,)?) => {
        $crate::layout::IntTuple::Tuple(::std::vec![$($crate::layout::IntTuple::from($e)),*])
    };
}

impl IntTuple {
    /// True for a single integer.
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// assert!(IntTuple::from(3).is_int());
    /// assert!(!IntTuple::from((3,)).is_int());
    /// ```
    pub fn is_int(&self) -> bool {
        matches!(self, IntTuple::Int(_))
    }

    /// Number of top-level entries; an integer has rank 1.
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// assert_eq!(IntTuple::from((2, (3, 4))).rank(), 2);
    /// assert_eq!(IntTuple::from(7).rank(), 1);
    /// ```
    pub fn rank(&self) -> usize {
        match self {
            IntTuple::Int(_) => 1,
            IntTuple::Tuple(v) => v.len(),
        }
    }

    /// Nesting depth: 0 for an integer, 1 for a flat tuple, and so on.
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// assert_eq!(IntTuple::from(7).depth(), 0);
    /// assert_eq!(IntTuple::from((2, (3, 4))).depth(), 2);
    /// ```
    pub fn depth(&self) -> usize {
        match self {
            IntTuple::Int(_) => 0,
            IntTuple::Tuple(v) => 1 + v.iter().map(IntTuple::depth).max().unwrap_or(0),
        }
    }

    /// Top-level entry `i`; an integer's only entry is itself.
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// let t = IntTuple::from((2, (3, 4)));
    /// assert_eq!(t.get(1), Some(&IntTuple::from((3, 4))));
    /// assert_eq!(t.get(2), None);
    /// ```
    pub fn get(&self, i: usize) -> Option<&IntTuple> {
        match self {
            IntTuple::Int(_) => (i == 0).then_some(self),
            IntTuple::Tuple(v) => v.get(i),
        }
    }

    /// The integers in depth-first order.
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// assert_eq!(IntTuple::from((2, (3, 4))).leaves(), vec![2, 3, 4]);
    /// ```
    pub fn leaves(&self) -> Vec<i64> {
        let mut out = Vec::new();
        self.push_leaves(&mut out);
        out
    }

    fn push_leaves(&self, out: &mut Vec<i64>) {
        match self {
            IntTuple::Int(v) => out.push(*v),
            IntTuple::Tuple(v) => v.iter().for_each(|t| t.push_leaves(out)),
        }
    }

    /// The leaves as a flat tuple (an integer stays an integer).
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// assert_eq!(IntTuple::from((2, (3, 4))).flatten(), IntTuple::from((2, 3, 4)));
    /// ```
    pub fn flatten(&self) -> IntTuple {
        match self {
            IntTuple::Int(_) => self.clone(),
            IntTuple::Tuple(_) => {
                IntTuple::Tuple(self.leaves().into_iter().map(Into::into).collect())
            }
        }
    }

    /// Product of all leaves (1 for the empty tuple), saturating at `i64::MAX`.
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// assert_eq!(IntTuple::from((2, (3, 4))).product(), 24);
    /// ```
    pub fn product(&self) -> i64 {
        self.leaves()
            .into_iter()
            .fold(1i64, |a, b| a.saturating_mul(b))
    }

    /// True when both have the same nesting (integers at the same places).
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// let a = IntTuple::from((2, (3, 4)));
    /// assert!(a.is_congruent(&IntTuple::from((1, (2, 6)))));
    /// assert!(!a.is_congruent(&IntTuple::from((1, 2, 6))));
    /// ```
    pub fn is_congruent(&self, other: &IntTuple) -> bool {
        match (self, other) {
            (IntTuple::Int(_), IntTuple::Int(_)) => true,
            (IntTuple::Tuple(a), IntTuple::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.is_congruent(y))
            }
            _ => false,
        }
    }

    /// A tuple of the same nesting with every leaf replaced by `f(leaf)`.
    ///
    /// ```
    /// use flydsl_dsl::layout::IntTuple;
    /// let t = IntTuple::from((2, (3, 4))).map(|v| v * 10);
    /// assert_eq!(t, IntTuple::from((20, (30, 40))));
    /// ```
    pub fn map(&self, f: impl Fn(i64) -> i64 + Copy) -> IntTuple {
        match self {
            IntTuple::Int(v) => IntTuple::Int(f(*v)),
            IntTuple::Tuple(v) => IntTuple::Tuple(v.iter().map(|t| t.map(f)).collect()),
        }
    }
}

impl fmt::Display for IntTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntTuple::Int(v) => write!(f, "{v}"),
            IntTuple::Tuple(v) => {
                f.write_str("(")?;
                for (i, t) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for IntTuple {
            fn from(v: $t) -> Self {
                IntTuple::Int(v as i64)
            }
        }
    )*};
}
from_int!(i64, i32, i16, i8, u8, u16, u32);

impl From<usize> for IntTuple {
    fn from(v: usize) -> Self {
        IntTuple::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<&IntTuple> for IntTuple {
    fn from(v: &IntTuple) -> Self {
        v.clone()
    }
}

impl From<Vec<IntTuple>> for IntTuple {
    fn from(v: Vec<IntTuple>) -> Self {
        IntTuple::Tuple(v)
    }
}

impl<T: Into<IntTuple>, const N: usize> From<[T; N]> for IntTuple {
    fn from(v: [T; N]) -> Self {
        IntTuple::Tuple(v.into_iter().map(Into::into).collect())
    }
}

macro_rules! from_tuple {
    ($($n:ident),+) => {
        impl<$($n: Into<IntTuple>),+> From<($($n,)+)> for IntTuple {
            #[allow(non_snake_case)]
            fn from(($($n,)+): ($($n,)+)) -> Self {
                IntTuple::Tuple(vec![$($n.into()),+])
            }
        }
    };
}
from_tuple!(A);
from_tuple!(A, B);
from_tuple!(A, B, C);
from_tuple!(A, B, C, D);
from_tuple!(A, B, C, D, E);
from_tuple!(A, B, C, D, E, F);
from_tuple!(A, B, C, D, E, F, G);
from_tuple!(A, B, C, D, E, F, G, H);
