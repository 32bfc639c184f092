//! Entries of the typed dispatch tables that `flydsl-build` generates for a kernel crate
//! (`flydsl_build::DispatchTable`): a key the crate's dispatcher looks up, the kernel's
//! variant table, and its typed launcher.

use crate::KernelVariants;

/// One kernel of a dispatch table: the dispatcher's `key` for it, its variant table (to ask
/// whether a device can run it), and its launcher, of the table's function-pointer type `F`.
///
/// ```
/// use flydsl_rt::{KernelVariants, Launcher};
/// static EMPTY: KernelVariants = KernelVariants { name: "noop", crate_name: "doc", variants: &[] };
/// fn noop() -> u32 { 7 }
/// static TABLE: &[Launcher<&str, fn() -> u32>] = &[Launcher { key: "noop", kernel: &EMPTY, launch: noop }];
/// let l = TABLE.iter().find(|l| l.key == "noop").unwrap();
/// assert_eq!(((l.launch)(), l.kernel.name), (7, "noop"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Launcher<K: 'static, F: 'static> {
    /// The dispatcher's key of this kernel (a path, a configuration index, ...).
    pub key: K,
    /// The kernel's compiled forms.
    pub kernel: &'static KernelVariants,
    /// The generated launcher.
    pub launch: F,
}

/// A generated dispatch table's slice for one element type (or pair): its kernels in the
/// order the build script declared them.
pub type Launchers<K, F> = &'static [Launcher<K, F>];

/// The entry of `table` whose key is `key`, if any.
///
/// ```
/// use flydsl_rt::{launcher, KernelVariants, Launcher};
/// static K: KernelVariants = KernelVariants { name: "k", crate_name: "doc", variants: &[] };
/// static T: &[Launcher<u8, fn()>] = &[Launcher { key: 3, kernel: &K, launch: || {} }];
/// assert!(launcher(T, &3).is_some() && launcher(T, &4).is_none());
/// ```
pub fn launcher<'a, K: PartialEq, F>(
    table: &'a [Launcher<K, F>],
    key: &K,
) -> Option<&'a Launcher<K, F>> {
    table.iter().find(|l| l.key == *key)
}
