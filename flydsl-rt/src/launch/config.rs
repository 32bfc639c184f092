//! Launch geometry: [`LaunchConfig`].

/// Grid and block dimensions of a launch (`grid` counts workgroups, not threads), and the
/// dynamic LDS / shared-memory bytes per workgroup for kernels with a dynamic LDS region.
///
/// ```
/// use flydsl_rt::LaunchConfig;
/// let cfg = LaunchConfig::for_elements(1000, 256);
/// assert_eq!(cfg.grid, [4, 1, 1]);
/// assert_eq!(cfg.block, [256, 1, 1]);
/// assert_eq!(cfg.threads_per_block(), 256);
/// assert_eq!(cfg.with_dynamic_lds(4096).dynamic_lds_bytes, 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Workgroups in x, y, z.
    pub grid: [u32; 3],
    /// Threads per workgroup in x, y, z.
    pub block: [u32; 3],
    /// Bytes of the kernel's dynamic LDS region per workgroup (0 for kernels without one).
    /// Size it with `flydsl_ir::dynamic_lds_layout`, the rule the DSL's dynamic arrays follow.
    pub dynamic_lds_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `grid_x` workgroups of `block_x` threads.
    ///
    /// ```
    /// let cfg = flydsl_rt::LaunchConfig::linear(8, 64);
    /// assert_eq!((cfg.grid, cfg.block), ([8, 1, 1], [64, 1, 1]));
    /// ```
    pub fn linear(grid_x: u32, block_x: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [grid_x, 1, 1],
            block: [block_x, 1, 1],
            dynamic_lds_bytes: 0,
        }
    }

    /// A 1-D launch covering `n` elements with one thread each, `block_x` threads per
    /// workgroup (the grid is rounded up; more than `u32::MAX` workgroups saturate, which the
    /// launch then rejects as too large only if the device does).
    ///
    /// ```
    /// let cfg = flydsl_rt::LaunchConfig::for_elements(0, 128);
    /// assert_eq!(cfg.grid, [0, 1, 1]); // an empty launch is a no-op
    /// ```
    pub fn for_elements(n: u64, block_x: u32) -> LaunchConfig {
        let blocks = n.div_ceil(u64::from(block_x.max(1)));
        LaunchConfig::linear(u32::try_from(blocks).unwrap_or(u32::MAX), block_x)
    }

    /// A 2-D grid of `block` workgroups.
    ///
    /// ```
    /// let cfg = flydsl_rt::LaunchConfig::grid_2d([4, 3], [16, 16]);
    /// assert_eq!(cfg.grid, [4, 3, 1]);
    /// ```
    pub fn grid_2d(grid: [u32; 2], block: [u32; 2]) -> LaunchConfig {
        LaunchConfig {
            grid: [grid[0], grid[1], 1],
            block: [block[0], block[1], 1],
            dynamic_lds_bytes: 0,
        }
    }

    /// The same launch with `bytes` of dynamic LDS per workgroup.
    ///
    /// ```
    /// use flydsl_ir::{dynamic_lds_layout, ScalarType};
    /// // A kernel carving n f32 and n i32 from its dynamic region.
    /// let n = 1000;
    /// let (_, bytes) = dynamic_lds_layout(&[(ScalarType::F32, n), (ScalarType::I32, n)]).unwrap();
    /// let cfg = flydsl_rt::LaunchConfig::linear(1, 256).with_dynamic_lds(bytes as u32);
    /// assert_eq!(cfg.dynamic_lds_bytes, 8000);
    /// ```
    pub fn with_dynamic_lds(mut self, bytes: u32) -> LaunchConfig {
        self.dynamic_lds_bytes = bytes;
        self
    }

    /// Threads per workgroup (as `u64`, so oversized blocks cannot overflow).
    pub fn threads_per_block(&self) -> u64 {
        self.block
            .iter()
            .fold(1u64, |a, &b| a.saturating_mul(u64::from(b)))
    }

    /// True when some grid dimension is zero (the launch does nothing).
    pub fn is_empty(&self) -> bool {
        self.grid.contains(&0)
    }
}
