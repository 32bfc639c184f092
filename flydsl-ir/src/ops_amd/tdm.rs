//! The gfx1250 Tensor Data Mover descriptor of a 2-D tile load ([`AmdOp::TensorLoadToLds`]
//! with 2 groups): its fields, their bit positions, and the checks the Sim applies.
//!
//! Bit layout (group 0 is `<4 x i32>`, group 1 `<8 x i32>`; from the public gfx1250
//! descriptor encoding that LLVM-based compilers emit; `dim0` is the innermost):
//!
//! | word | bits | field |
//! |---|---|---|
//! | g0[0] | 1:0 | predicate (0: the load does nothing) |
//! | g0[0] | 31 | gather enable (not supported here) |
//! | g0[1] | 31:0 | LDS byte address |
//! | g0[2] | 31:0 | global byte address, bits 31:0 |
//! | g0[3] | 24:0 | global byte address, bits 56:32 |
//! | g0[3] | 31:30 | type, 2 |
//! | g1[0] | 15:0 | multicast mask (not supported here) |
//! | g1[0] | 17:16 | log2(element bytes) |
//! | g1[0] | 18, 19 | atomic-barrier enable, iterate enable (not supported here) |
//! | g1[0] | 20 | LDS padding enable |
//! | g1[0] | 24:22 | log2(pad interval in dwords) - 1 |
//! | g1[0] | 31:25 | pad amount in dwords - 1 |
//! | g1[1] | 31:16 | tensor dim0, bits 15:0 |
//! | g1[2] | 15:0, 31:16 | tensor dim0 bits 31:16; tensor dim1 bits 15:0 |
//! | g1[3] | 15:0, 31:16 | tensor dim1 bits 31:16; tile dim0 |
//! | g1[4] | 15:0 | tile dim1 |
//! | g1[5], g1[6] 15:0 | | dim1 stride in elements (48 bits) |
//!
//! Semantics (what the Sim runs): for each row `r < tile_dim1` and column `c < tile_dim0`,
//! element `i = r * tile_dim0 + c` of the LDS stream gets the element at `global + es * (r *
//! stride + c)` when `r < tensor_dim1` and `c < tensor_dim0`, else zero; the stream lands at
//! LDS byte `lds + es * i`, plus, with padding, `pad_amount` dwords after every
//! `pad_interval` dwords. Starting a tile inside a tensor moves `global` and shrinks the
//! tensor dims by the tile's start, so the dims bound what is read.

use super::AmdOp;

/// A 2-D Tensor Data Mover load, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TdmDesc {
    /// The load runs (the predicate bits are non-zero).
    pub pred: bool,
    /// LDS byte address of the tile's first element.
    pub lds_addr: u32,
    /// Global byte address of the tile's first element (57 bits).
    pub global_addr: u64,
    /// Bytes per element: 1, 2, 4 or 8.
    pub elem_bytes: u32,
    /// Elements of the tensor from the tile's start, innermost first (reads past them are
    /// zeros).
    pub tensor_dims: [u32; 2],
    /// The tile, innermost first.
    pub tile_dims: [u16; 2],
    /// Elements between rows (dim 1).
    pub stride: u64,
    /// LDS padding: `(interval, amount)` in dwords (interval a power of two in 2..=256,
    /// amount in 1..=128).
    pub pad: Option<(u32, u32)>,
}

impl TdmDesc {
    /// The two descriptor groups.
    ///
    /// ```
    /// use flydsl_ir::TdmDesc;
    /// let d = TdmDesc {
    ///     pred: true, lds_addr: 256, global_addr: 0x1_0000_0040, elem_bytes: 2,
    ///     tensor_dims: [100, 70], tile_dims: [64, 32], stride: 128, pad: None,
    /// };
    /// let (g0, g1) = d.encode();
    /// assert_eq!(g0, [1, 256, 0x40, 0x8000_0001]);
    /// assert_eq!(g1[0], 1 << 16);
    /// assert_eq!(TdmDesc::decode(&g0, &g1), Ok(d));
    /// ```
    pub fn encode(&self) -> ([u32; 4], [u32; 8]) {
        let g0 = [
            u32::from(self.pred),
            self.lds_addr,
            self.global_addr as u32,
            ((self.global_addr >> 32) as u32 & 0x01ff_ffff) | 2 << 30,
        ];
        let mut w0 = self.elem_bytes.trailing_zeros() << 16;
        if let Some((interval, amount)) = self.pad {
            w0 |= 1 << 20 | (interval.trailing_zeros() - 1) << 22 | (amount - 1) << 25;
        }
        let [d0, d1] = self.tensor_dims;
        let g1 = [
            w0,
            (d0 & 0xffff) << 16,
            d0 >> 16 | (d1 & 0xffff) << 16,
            d1 >> 16 | u32::from(self.tile_dims[0]) << 16,
            u32::from(self.tile_dims[1]),
            self.stride as u32,
            (self.stride >> 32) as u32 & 0xffff,
            0,
        ];
        (g0, g1)
    }

    /// Decode two descriptor groups, or say which field is one the Sim does not run.
    pub fn decode(g0: &[u32], g1: &[u32]) -> Result<TdmDesc, String> {
        let (Ok(g0), Ok(g1)) = (<[u32; 4]>::try_from(g0), <[u32; 8]>::try_from(g1)) else {
            return Err("a 2-D descriptor has groups of 4 and 8 words".into());
        };
        let unsupported = |what: &str| {
            Err(format!(
                "the descriptor sets {what}, which the Sim does not model"
            ))
        };
        if g0[0] & 1 << 31 != 0 {
            return unsupported("gather mode (group 0 bit 31)");
        }
        if g0[3] >> 30 != 2 {
            return Err(format!(
                "the descriptor type (group 0 word 3 bits 31:30) is {}, not 2",
                g0[3] >> 30
            ));
        }
        if g1[0] & 0xffff != 0 {
            return unsupported("a multicast mask (group 1 bits 15:0)");
        }
        if g1[0] & (1 << 18 | 1 << 19) != 0 {
            return unsupported("the atomic barrier or iterate bits (group 1 bits 18, 19)");
        }
        let pad = (g1[0] & 1 << 20 != 0)
            .then(|| (2u32 << ((g1[0] >> 22) & 7), ((g1[0] >> 25) & 0x7f) + 1));
        let tile_dims = [(g1[3] >> 16) as u16, (g1[4] & 0xffff) as u16];
        if tile_dims.contains(&0) {
            return unsupported("a zero tile dimension");
        }
        if g1[4] >> 16 != 0 {
            return unsupported("tile dim2 (a 3-D tile in a 2-group descriptor)");
        }
        Ok(TdmDesc {
            pred: g0[0] & 3 != 0,
            lds_addr: g0[1],
            global_addr: u64::from(g0[2]) | u64::from(g0[3] & 0x01ff_ffff) << 32,
            elem_bytes: 1 << ((g1[0] >> 16) & 3),
            tensor_dims: [
                g1[1] >> 16 | (g1[2] & 0xffff) << 16,
                g1[2] >> 16 | (g1[3] & 0xffff) << 16,
            ],
            tile_dims,
            stride: u64::from(g1[5]) | u64::from(g1[6] & 0xffff) << 32,
            pad,
        })
    }

    /// The LDS byte offset (from [`TdmDesc::lds_addr`]) of element `i` of the tile's stream.
    pub fn lds_offset(&self, i: u64) -> u64 {
        let b = i * u64::from(self.elem_bytes);
        match self.pad {
            Some((interval, amount)) => b + b / (4 * u64::from(interval)) * 4 * u64::from(amount),
            None => b,
        }
    }
}

impl AmdOp {
    /// The host-side template of a 2-D TDM load of `(tile_rows, tile_cols)` tiles of a
    /// row-major `rows x cols` matrix of `elem_bytes`-byte elements at device address
    /// `base` with `ld` elements between rows: the 12 words (group 0 then group 1) that a
    /// kernel loads and completes with the LDS address, the predicate and the tile's start
    /// (`flydsl_dsl::tile::TdmCopy`).
    ///
    /// ```
    /// use flydsl_ir::{AmdOp, TdmDesc};
    /// let w = AmdOp::tdm_template(0x40, 2, (70, 100), 128, (32, 64));
    /// let d = TdmDesc::decode(&w[..4], &w[4..]).unwrap();
    /// assert_eq!((d.tensor_dims, d.tile_dims, d.stride), ([100, 70], [64, 32], 128));
    /// ```
    pub fn tdm_template(
        base: u64,
        elem_bytes: u32,
        (rows, cols): (u32, u32),
        ld: u64,
        (tile_rows, tile_cols): (u16, u16),
    ) -> [u32; 12] {
        let (g0, g1) = TdmDesc {
            pred: false,
            lds_addr: 0,
            global_addr: base,
            elem_bytes,
            tensor_dims: [cols, rows],
            tile_dims: [tile_cols, tile_rows],
            stride: ld,
            pad: None,
        }
        .encode();
        let mut w = [0u32; 12];
        w[..4].copy_from_slice(&g0);
        w[4..].copy_from_slice(&g1);
        w
    }
}
