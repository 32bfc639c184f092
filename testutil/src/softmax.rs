//! Softmax CPU references (filled in by fly-softmax).
