//! fly-attn: FlashAttention forward kernels.
//!
//! Not implemented yet. This crate will hold FlashAttention forward (MHA/GQA/MQA, causal,
//! varlen, split-K, LSE, fp8 descale; see `shared/facts/kernels.md`). It exists now so that
//! the workspace layout, features and CI are in place.
