//! The Sim's tensor map: the 128 bytes a TMA op reads on the Sim, in place of the opaque
//! `CUtensorMap` the CUDA driver encodes. `flydsl_rt::TensorMap` writes one or the other
//! depending on the device.

/// Bytes of a tensor map (as on CUDA).
pub const TENSOR_MAP_BYTES: usize = 128;
const MAGIC: u32 = 0x4d54_4c46; // "FLTM"
/// Most dimensions a tensor map has.
pub const MAX_RANK: usize = 5;

/// A tiled tensor map: a strided tensor in global memory and the box one TMA copy moves.
///
/// ```
/// use flydsl_sim::SimTensorMap;
/// let m = SimTensorMap { base: 4096, elem_bytes: 2, rank: 2, dims: [64, 10, 1, 1, 1],
///     strides: [2, 128, 0, 0, 0], boxes: [64, 8, 1, 1, 1], swizzle128: true };
/// assert_eq!(SimTensorMap::decode(&m.encode()), Some(m));
/// assert_eq!(m.box_bytes(), 64 * 8 * 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimTensorMap {
    /// Device address of element (0, 0, ...).
    pub base: u64,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Dimensions used (1..=5).
    pub rank: u32,
    /// Extent per dimension, innermost first.
    pub dims: [u64; MAX_RANK],
    /// Byte stride per dimension (dimension 0: the element size).
    pub strides: [u64; MAX_RANK],
    /// Box extent per dimension.
    pub boxes: [u32; MAX_RANK],
    /// The box lands in LDS with the 128-byte swizzle (`flydsl_ir::swizzle128`).
    pub swizzle128: bool,
}

impl SimTensorMap {
    /// Bytes one copy of the box moves (the transaction count a TMA load signals).
    pub fn box_bytes(&self) -> u64 {
        let elems: u64 = self.boxes[..self.rank as usize]
            .iter()
            .map(|&b| b as u64)
            .product();
        elems * self.elem_bytes as u64
    }

    /// The 128-byte encoding.
    pub fn encode(&self) -> [u8; TENSOR_MAP_BYTES] {
        let mut b = [0u8; TENSOR_MAP_BYTES];
        let mut w = Writer { b: &mut b, at: 0 };
        w.put(&MAGIC.to_le_bytes());
        w.put(&self.elem_bytes.to_le_bytes());
        w.put(&self.rank.to_le_bytes());
        w.put(&(self.swizzle128 as u32).to_le_bytes());
        w.put(&self.base.to_le_bytes());
        for d in self.dims {
            w.put(&d.to_le_bytes());
        }
        // Strides of dimensions 1.. (dimension 0's is the element size).
        for s in &self.strides[1..] {
            w.put(&s.to_le_bytes());
        }
        for x in self.boxes {
            w.put(&(x as u16).to_le_bytes());
        }
        b
    }

    /// Decode; `None` when the bytes are not a Sim tensor map.
    pub fn decode(b: &[u8]) -> Option<SimTensorMap> {
        if b.len() < TENSOR_MAP_BYTES {
            return None;
        }
        let mut r = Reader { b, at: 0 };
        if r.u32() != MAGIC {
            return None;
        }
        let elem_bytes = r.u32();
        let rank = r.u32();
        let swizzle128 = r.u32() != 0;
        let base = r.u64();
        let mut dims = [0u64; MAX_RANK];
        for d in &mut dims {
            *d = r.u64();
        }
        let mut strides = [0u64; MAX_RANK];
        strides[0] = elem_bytes as u64;
        for s in &mut strides[1..] {
            *s = r.u64();
        }
        let mut boxes = [0u32; MAX_RANK];
        for x in &mut boxes {
            *x = r.u16() as u32;
        }
        if !(1..=MAX_RANK as u32).contains(&rank) || elem_bytes == 0 {
            return None;
        }
        Some(SimTensorMap {
            base,
            elem_bytes,
            rank,
            dims,
            strides,
            boxes,
            swizzle128,
        })
    }
}

struct Writer<'a> {
    b: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, x: &[u8]) {
        self.b[self.at..self.at + x.len()].copy_from_slice(x);
        self.at += x.len();
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut x = [0u8; N];
        x.copy_from_slice(&self.b[self.at..self.at + N]);
        self.at += N;
        x
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}
