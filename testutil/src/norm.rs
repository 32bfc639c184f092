//! LayerNorm / RMSNorm CPU references (filled in by fly-norm).
