//! Register fragments.

use crate::layout::Layout;
use crate::val::{cnst, Val};
use flydsl_ir::{Const, Type};

/// A register fragment: values (scalars or vectors) with a layout from a logical coordinate
/// to the position in [`Frag::vals`]. A fragment is loop state itself ([`Carry`]: carry it
/// through [`for_range_with`](crate::for_range_with)), or carry [`Frag::vals`] through
/// [`for_range`](crate::for_range) and rebuild with [`Frag::with_vals`].
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::layout::Layout;
/// use flydsl_dsl::tile::Frag;
/// use flydsl_dsl::ir::{ScalarType::F32, Target, Type};
/// KernelBuilder::new("k", Target::Sm90, 32).build(|_| {
///     let f = Frag::zeros(Type::vec(F32, 4), Layout::col_major((2, 3)).unwrap());
///     assert_eq!(f.vals().len(), 6);
///     let g = f.with_vals(f.vals().to_vec());
///     assert_eq!(g.at(&[1, 2]).ty(), Type::vec(F32, 4));
/// }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Frag {
    vals: Vec<Val>,
    layout: Layout,
}

impl Frag {
    /// A fragment of `vals` laid out by `layout` (`layout.size() == vals.len()`).
    pub fn new(vals: Vec<Val>, layout: Layout) -> Frag {
        debug_assert_eq!(layout.size() as usize, vals.len());
        Frag { vals, layout }
    }
    /// A fragment of zeros of type `ty`.
    pub fn zeros(ty: Type, layout: Layout) -> Frag {
        let z = if ty.elem().is_some_and(|e| e.is_float()) {
            Const::Float(0.0)
        } else {
            Const::Int(0)
        };
        let vals = (0..layout.size()).map(|_| cnst(ty, z)).collect();
        Frag { vals, layout }
    }
    /// The values in storage order.
    pub fn vals(&self) -> &[Val] {
        &self.vals
    }
    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The same layout over new values (e.g. a loop's carried values).
    pub fn with_vals(&self, vals: Vec<Val>) -> Frag {
        Frag::new(vals, self.layout.clone())
    }
    /// The value at a flat coordinate of the layout's modes (`[i, j]` for rank 2).
    pub fn at(&self, crd: &[i64]) -> Val {
        use crate::layout::Coord;
        let c = Coord::Tuple(crd.iter().map(|&x| Coord::Int(x)).collect());
        let i = if crd.len() == 1 {
            self.layout.call(&crd[0])
        } else {
            self.layout.crd2idx(&c)
        };
        self.vals[i.unwrap_or(0) as usize]
    }
}

/// A fragment carries its values (the layout is static and kept).
///
/// ```
/// use flydsl_dsl::*;
/// use flydsl_dsl::layout::Layout;
/// use flydsl_dsl::tile::Frag;
/// use flydsl_dsl::ir::{ScalarType::F32, Target, Type};
/// KernelBuilder::new("k", Target::Gfx942, 64).build(|k| {
///     let y = k.tensor_mut("y", F32);
///     let f = Frag::zeros(Type::s(F32), Layout::col_major(2).unwrap());
///     let f = for_range_with(0, 4, 1, f, |_, f| f.with_vals(f.vals().iter().map(|&v| v + 1.0f32).collect()));
///     y.store(thread_id_x(), f.at(&[1]));
/// }).unwrap();
/// ```
impl crate::Carry for Frag {
    fn flatten(&self, out: &mut Vec<Val>) {
        self.vals.flatten(out);
    }
    fn rebuild(&self, vals: &mut std::slice::Iter<'_, Val>) -> Self {
        self.with_vals(self.vals.rebuild(vals))
    }
}
