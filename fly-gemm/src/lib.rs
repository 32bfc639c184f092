//! fly-gemm: preshuffle GEMM kernels.
//!
//! Not implemented yet. This crate will hold `C = A * B^T` for fp8 / int8 / f16 / bf16
//! inputs with per-row and per-column scales and fused epilogues, plus the host-side B
//! preshuffle (see `shared/facts/kernels.md`, "Preshuffle GEMM"). It exists now so that the
//! workspace layout, features and CI are in place.
