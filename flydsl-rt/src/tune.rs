//! Generic autotuner (filled in by the softmax family).
