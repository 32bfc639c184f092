//! Norm benches (filled in when fly-norm lands).

use crate::bench::{Ctx, R};

pub fn run(_c: &mut Ctx) -> R<()> {
    Ok(())
}
