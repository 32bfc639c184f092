//! Every family through the binding core on the sm90 Sim, against the CPU references of
//! `flydsl-testutil`, with Sim allocations standing in for torch tensors (descriptors of
//! device type `sim`); and the validation rules: each bad input is refused with an error
//! naming the Python function, the argument and the fix, and leaves the outputs unwritten.

use fly_gemm::QuantElement;
use flydsl_bind::attn::{attention, Attn, Seqlens, Varlen};
use flydsl_bind::gemm::{gemm, preshuffle_b_bytes, Gemm};
use flydsl_bind::norm::{norm_bwd, norm_fwd, NormBwd, NormFwd};
use flydsl_bind::softmax::{softmax, softmax_backward};
use flydsl_bind::{Alloc, BindError, Dtype, Env, ErrorKind, Gpu, NoAlloc, Tensor, View};
use flydsl_rt::half::{bf16, f16};
use flydsl_rt::{Device, DeviceBuffer, Target, F8E4M3FN};
use flydsl_testutil::attn::{assert_lse, assert_out_dtype, attn_ref, AttnShape};
use flydsl_testutil::compare::assert_close;
use flydsl_testutil::gemm::{elem_tolerance, gemm_ref, gemm_scaled_ref, Act};
use flydsl_testutil::norm::{self, Tol};
use flydsl_testutil::rng::Rng;
use flydsl_testutil::softmax as sref;

const TARGET: Target = Target::Sm90;

fn env() -> Env {
    Env {
        gpu: Gpu::Sim(TARGET),
        stream: 0,
    }
}

/// Little-endian element codecs of the test data.
trait Le: Copy {
    const DT: Dtype;
    fn put(self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
    fn f64(self) -> f64;
}

macro_rules! le {
    ($t:ty, $dt:ident, $n:expr, $to:expr) => {
        impl Le for $t {
            const DT: Dtype = Dtype::$dt;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            fn f64(self) -> f64 {
                let f: fn($t) -> f64 = $to;
                f(self)
            }
        }
    };
}
le!(f32, F32, 4, |v| v as f64);
le!(bf16, BF16, 2, |v| v.to_f64());
le!(f16, F16, 2, |v| v.to_f64());
le!(i8, I8, 1, |v| v as f64);
le!(i32, I32, 4, |v| v as f64);

impl Le for F8E4M3FN {
    const DT: Dtype = Dtype::F8E4M3FN;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self.to_bits());
    }
    fn get(b: &[u8]) -> Self {
        F8E4M3FN::from_bits(b[0])
    }
    fn f64(self) -> f64 {
        self.dequantize() as f64
    }
}

/// Sim memory standing in for torch's: every tensor of a test lives here, and the
/// allocator of left-out outputs puts new zeroed ones here.
#[derive(Default)]
struct Mem {
    bufs: Vec<DeviceBuffer<u8>>,
    allocs: usize,
}

impl Mem {
    fn dev() -> Device {
        Device::sim(TARGET)
    }

    fn raw(&mut self, bytes: &[u8], shape: &[i64], dtype: Dtype) -> Tensor {
        let b = DeviceBuffer::from_slice(&Self::dev(), bytes).unwrap();
        let t = Tensor::contiguous(b.as_device_ptr(), shape, dtype.name(), "sim", Some(0));
        self.bufs.push(b);
        t
    }

    fn put<T: Le>(&mut self, v: &[T], shape: &[i64]) -> Tensor {
        let mut bytes = Vec::new();
        v.iter().for_each(|x| x.put(&mut bytes));
        self.raw(&bytes, shape, T::DT)
    }

    fn get<T: Le>(&self, t: &Tensor) -> Vec<T> {
        let b = self
            .bufs
            .iter()
            .find(|b| b.as_device_ptr() == t.ptr)
            .expect("a tensor of this test");
        let bytes = b.to_vec().unwrap();
        let size = Dtype::parse(&t.dtype).unwrap().size();
        bytes.chunks_exact(size).map(T::get).collect()
    }

    fn get64<T: Le>(&self, v: &View) -> Vec<f64> {
        let t = Tensor::contiguous(v.ptr, &[], v.dtype.name(), "sim", Some(0));
        self.get::<T>(&t).into_iter().map(Le::f64).collect()
    }
}

impl Alloc for Mem {
    fn alloc(
        &mut self,
        _slot: usize,
        shape: &[usize],
        dtype: Dtype,
        index: Option<i64>,
    ) -> flydsl_bind::Result<Tensor> {
        assert_eq!(index, Some(0), "outputs go to the inputs' device");
        self.allocs += 1;
        let n: usize = shape.iter().product();
        let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        Ok(self.raw(&vec![0u8; n * dtype.size()], &shape, dtype))
    }
}

fn rand<T: Le>(rng: &mut Rng, n: usize, cast: fn(f32) -> T) -> Vec<T> {
    rng.randn(n).into_iter().map(cast).collect()
}

fn wide<T: Le>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.f64()).collect()
}

fn slot(outs: &[Option<View>], i: usize) -> &View {
    outs[i].as_ref().expect("output written")
}

#[test]
fn rms_norm_with_residual_and_rstd_matches_the_reference() {
    let (m, n, eps) = (6, 40, 1e-5); // n % 8 != 0: the generic path
    let mut mem = Mem::default();
    let mut rng = Rng::new(1);
    let x = rand(&mut rng, m * n, bf16::from_f32);
    let r = rand(&mut rng, m * n, bf16::from_f32);
    let w: Vec<f32> = rng.rand(n); // f32 weights with bf16 activations
    let (tx, tr, tw) = (
        mem.put(&x, &[2, 3, n as i64]),
        mem.put(&r, &[2, 3, n as i64]),
        mem.put(&w, &[n as i64]),
    );
    let a = NormFwd {
        name: "rms_norm",
        norm: fly_norm::Norm::Rms,
        x: &tx,
        residual: Some(&tr),
        weight: &tw,
        bias: None,
        quant: false,
        xscale: None,
        stats: true,
        eps,
        outs: [None; 5],
    };
    // SAFETY: every tensor is a live Sim allocation of `mem` of its described size.
    let outs = unsafe { norm_fwd(env(), &mut mem, &a) }.unwrap();
    assert_eq!(mem.allocs, 3, "y, residual_out and rstd were allocated");
    assert!(outs[1].is_none() && outs[3].is_none());
    assert_eq!(slot(&outs, 0).shape, vec![2, 3, n]);
    assert_eq!(slot(&outs, 4).shape, vec![2, 3]);
    let want = norm::rms_norm_fwd::<bf16>(&wide(&x), Some(&wide(&r)), &wide(&w), m, n, eps);
    let t = Tol::MIXED_BF16;
    let y = mem.get64::<bf16>(slot(&outs, 0));
    assert_close("y", &y, &want.y, t.fwd_atol, t.fwd_rtol);
    assert_eq!(
        mem.get64::<bf16>(slot(&outs, 2)),
        want.input,
        "residual_out"
    );
    assert_close(
        "rstd",
        &mem.get64::<f32>(slot(&outs, 4)),
        &want.rstd,
        1e-4,
        1e-4,
    );
}

#[test]
fn layer_norm_stats_and_smooth_quant_match_the_reference() {
    let (m, n, eps) = (5, 64, 1e-5);
    let mut mem = Mem::default();
    let mut rng = Rng::new(2);
    let x: Vec<f32> = rng.randn(m * n);
    let (w, b): (Vec<f32>, Vec<f32>) = (rng.rand(n), rng.rand(n));
    let xs: Vec<f32> = rng.rand(n).iter().map(|v| v + 0.5).collect();
    let (tx, tw, tb, txs) = (
        mem.put(&x, &[m as i64, n as i64]),
        mem.put(&w, &[n as i64]),
        mem.put(&b, &[n as i64]),
        mem.put(&xs, &[n as i64]),
    );
    let mut a = NormFwd {
        name: "layer_norm",
        norm: fly_norm::Norm::Layer,
        x: &tx,
        residual: None,
        weight: &tw,
        bias: Some(&tb),
        quant: false,
        xscale: None,
        stats: true,
        eps,
        outs: [None; 5],
    };
    // SAFETY: as above.
    let outs = unsafe { norm_fwd(env(), &mut mem, &a) }.unwrap();
    let want = norm::layer_norm_fwd::<f32>(&wide(&x), None, &wide(&w), Some(&wide(&b)), m, n, eps);
    let t = Tol::F32;
    assert_close(
        "y",
        &mem.get64::<f32>(slot(&outs, 0)),
        &want.y,
        t.fwd_atol,
        0.0,
    );
    assert_close(
        "mean",
        &mem.get64::<f32>(slot(&outs, 3)),
        &want.mean,
        1e-4,
        1e-4,
    );
    assert_close(
        "rstd",
        &mem.get64::<f32>(slot(&outs, 4)),
        &want.rstd,
        1e-4,
        1e-4,
    );
    a.name = "layer_norm_quant";
    a.quant = true;
    a.stats = false;
    a.xscale = Some(&txs);
    // SAFETY: as above.
    let outs = unsafe { norm_fwd(env(), &mut mem, &a) }.unwrap();
    assert_eq!(slot(&outs, 0).dtype, Dtype::I8);
    let (q, ys) = norm::quant(&want.y, Some(&wide(&xs)), m, n);
    let gq = mem.get64::<i8>(slot(&outs, 0));
    let wq: Vec<f64> = q.iter().map(|&v| v as f64).collect();
    assert_close("q", &gq, &wq, 1.0, 0.0);
    assert_close(
        "yscale",
        &mem.get64::<f32>(slot(&outs, 1)),
        &ys,
        t.yscale,
        0.0,
    );
}

#[test]
fn norm_backward_matches_the_reference() {
    let (m, n) = (7, 48);
    let mut mem = Mem::default();
    let mut rng = Rng::new(3);
    let x: Vec<f32> = rng.randn(m * n);
    let dy: Vec<f32> = rng.randn(m * n);
    let w: Vec<f32> = rng.rand(n);
    let fwd = norm::layer_norm_fwd::<f32>(&wide(&x), None, &wide(&w), None, m, n, 1e-5);
    let mean: Vec<f32> = fwd.mean.iter().map(|&v| v as f32).collect();
    let rstd: Vec<f32> = fwd.rstd.iter().map(|&v| v as f32).collect();
    let sh = [m as i64, n as i64];
    let (tx, tdy, tw) = (
        mem.put(&x, &sh),
        mem.put(&dy, &sh),
        mem.put(&w, &[n as i64]),
    );
    let (tm, tr) = (mem.put(&mean, &[m as i64]), mem.put(&rstd, &[m as i64]));
    let t = Tol::F32;
    for (norm, strategy) in [
        (fly_norm::Norm::Layer, "atomic"),
        (fly_norm::Norm::Rms, "two_stage"),
    ] {
        let layer = norm == fly_norm::Norm::Layer;
        let a = NormBwd {
            name: "norm_backward",
            norm,
            dy: &tdy,
            x: &tx,
            weight: &tw,
            mean: layer.then_some(&tm),
            rstd: &tr,
            dresidual: None,
            dbias: layer,
            strategy,
            outs: [None; 3],
        };
        // SAFETY: as above.
        let outs = unsafe { norm_bwd(env(), &mut mem, &a) }.unwrap();
        let m64 = wide(&mean);
        let want = if layer {
            norm::layer_norm_bwd(&wide(&x), &wide(&w), &wide(&dy), &m64, &wide(&rstd), m, n)
        } else {
            norm::rms_norm_bwd(&wide(&x), &wide(&w), &wide(&dy), &wide(&rstd), None, m, n)
        };
        let dx = mem.get64::<f32>(slot(&outs, 0));
        assert_close("dx", &dx, &want.dx, t.dx_atol, t.dx_rtol);
        let dw = mem.get64::<f32>(slot(&outs, 1));
        assert_close("dweight", &dw, &want.dgamma, t.dw_atol, t.dw_rtol);
        if layer {
            let db = mem.get64::<f32>(slot(&outs, 2));
            assert_close("dbias", &db, &want.dbeta, t.dw_atol, t.dw_rtol);
        } else {
            assert!(outs[2].is_none());
        }
    }
}

#[test]
fn softmax_forward_and_backward_match_the_reference() {
    let (m, n) = (4, 100);
    let mut mem = Mem::default();
    let mut rng = Rng::new(4);
    let x = rand(&mut rng, m * n, f16::from_f32);
    let tx = mem.put(&x, &[m as i64, n as i64]);
    // SAFETY: as above.
    let y = unsafe { softmax(env(), &mut mem, &tx, None) }.unwrap();
    let want = sref::forward(&wide(&x), m, n);
    let t = sref::tolerance("f16");
    let got = mem.get64::<f16>(&y);
    sref::check_forward("softmax", &got, &want, m, n, &t).unwrap();
    let yh: Vec<f16> = got.iter().map(|&v| f16::from_f64(v)).collect();
    let dy = rand(&mut rng, m * n, f16::from_f32);
    let (ty, tdy) = (
        mem.put(&yh, &[m as i64, n as i64]),
        mem.put(&dy, &[m as i64, n as i64]),
    );
    // SAFETY: as above.
    let dx = unsafe { softmax_backward(env(), &mut mem, &ty, &tdy, None) }.unwrap();
    let want = sref::backward(&wide(&yh), &wide(&dy), m, n);
    sref::check_backward("softmax_backward", &mem.get64::<f16>(&dx), &want, &t).unwrap();
}

fn check_gemm(what: &str, got: &[f64], want: &[f64], k: usize, act: Act) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = elem_tolerance("bf16", k, 4.0 * k as f64, 0.0, w, w, act) + 1e-2 * w.abs();
        assert!((g - w).abs() <= tol, "{what}[{i}]: {g} vs {w} (tol {tol})");
    }
}

#[test]
fn gemm_16_bit_with_bias_and_activation_matches_the_reference() {
    let (m, n, k) = (6, 24, 32);
    let mut mem = Mem::default();
    let mut rng = Rng::new(5);
    let a = rand(&mut rng, m * k, bf16::from_f32);
    let b = rand(&mut rng, n * k, bf16::from_f32);
    let bias = rand(&mut rng, n, bf16::from_f32);
    let (ta, tb, tbias) = (
        mem.put(&a, &[2, 3, k as i64]),
        mem.put(&b, &[n as i64, k as i64]),
        mem.put(&bias, &[n as i64]),
    );
    let g = Gemm {
        name: "gemm",
        a: &ta,
        b: &tb,
        scales: None,
        bias: Some(&tbias),
        activation: Some("silu"),
        b_preshuffled: false,
        out_dtype: None,
        out: None,
    };
    // SAFETY: as above.
    let out = unsafe { gemm(env(), &mut mem, &g) }.unwrap();
    assert_eq!(out.shape, vec![2, 3, n]);
    let f = |v: &[bf16]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let want = gemm_ref(&f(&a), &f(&b), Some(&f(&bias)), m, n, k, Act::Silu);
    check_gemm("gemm", &mem.get64::<bf16>(&out), &want, k, Act::Silu);
}

#[test]
fn gemm_scaled_int8_plain_and_preshuffled_match_the_reference() {
    let (m, n, k) = (5, 16, 64);
    let mut mem = Mem::default();
    let mut rng = Rng::new(6);
    let (aq, sa) = fly_gemm::quantize_rows::<i8>(&rng.randn(m * k), m, k).unwrap();
    let (bq, sb) = fly_gemm::quantize_rows::<i8>(&rng.randn(n * k), n, k).unwrap();
    let bbytes: Vec<u8> = bq.iter().map(|&v| v as u8).collect();
    let shuffled = preshuffle_b_bytes(&bbytes, n, k, 1).unwrap();
    assert_ne!(shuffled, bbytes, "the preshuffle moves bytes");
    let ta = mem.put(&aq, &[m as i64, k as i64]);
    let tb = mem.put(&bq, &[n as i64, k as i64]);
    let tbs = mem.raw(&shuffled, &[n as i64, k as i64], Dtype::I8);
    let (tsa, tsb) = (mem.put(&sa, &[m as i64]), mem.put(&sb, &[n as i64]));
    let f = |v: &[i8]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let want = gemm_scaled_ref(&f(&aq), &f(&bq), &sa, &sb, None, m, n, k, Act::None);
    for (b, pre) in [(&tb, false), (&tbs, true)] {
        let g = Gemm {
            name: "gemm_scaled",
            a: &ta,
            b,
            scales: Some((&tsa, &tsb)),
            bias: None,
            activation: None,
            b_preshuffled: pre,
            out_dtype: Some("torch.float16"),
            out: None,
        };
        // SAFETY: as above.
        let out = unsafe { gemm(env(), &mut mem, &g) }.unwrap();
        assert_eq!(out.dtype, Dtype::F16);
        let got = mem.get64::<f16>(&out);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 2e-3 * w.abs() + 1e-4,
                "preshuffled {pre} [{i}]: {g} vs {w}"
            );
        }
    }
}

#[test]
fn attention_dense_varlen_and_fp8_match_the_reference() {
    let mut mem = Mem::default();
    let mut rng = Rng::new(7);
    // Dense bf16, GQA, causal, seqlen_q != seqlen_kv, with LSE.
    let s = AttnShape::dense(2, 5, 7, 4, 2, 32, true);
    let q = rand(&mut rng, s.q_len(), bf16::from_f32);
    let k = rand(&mut rng, s.kv_len(), bf16::from_f32);
    let v = rand(&mut rng, s.kv_len(), bf16::from_f32);
    let (tq, tk, tv) = (
        mem.put(&q, &[2, 5, 4, 32]),
        mem.put(&k, &[2, 7, 2, 32]),
        mem.put(&v, &[2, 7, 2, 32]),
    );
    let mut a = Attn {
        name: "flash_attn",
        q: &tq,
        k: &tk,
        v: &tv,
        descales: None,
        varlen: None,
        causal: true,
        softmax_scale: None,
        num_kv_splits: None,
        kernel: "auto",
        return_lse: true,
        outs: [None, None],
    };
    // SAFETY: as above.
    let outs = unsafe { attention(env(), &mut mem, &a) }.unwrap();
    let want = attn_ref(&s, &wide(&q), &wide(&k), &wide(&v));
    assert_eq!(slot(&outs, 1).shape, vec![2, 4, 5]);
    assert_out_dtype(
        "dense",
        "bf16",
        &mem.get64::<bf16>(slot(&outs, 0)),
        &want.out,
        32,
    );
    assert_lse(
        "dense",
        "bf16",
        &mem.get64::<f32>(slot(&outs, 1)),
        &want.lse,
    );

    // Varlen f16 with host offsets for q and device offsets for kv.
    let s = AttnShape::varlen(&[3, 0, 4], &[5, 2, 4], 2, 2, 32, false);
    let (cq, ck) = s.cu_seqlens.clone().unwrap();
    let q = rand(&mut rng, s.q_len(), f16::from_f32);
    let k = rand(&mut rng, s.kv_len(), f16::from_f32);
    let v = rand(&mut rng, s.kv_len(), f16::from_f32);
    let (tq, tk, tv) = (
        mem.put(&q, &[7, 2, 32]),
        mem.put(&k, &[11, 2, 32]),
        mem.put(&v, &[11, 2, 32]),
    );
    let tck = mem.put(&ck, &[4]);
    a.q = &tq;
    a.k = &tk;
    a.v = &tv;
    a.causal = false;
    a.return_lse = false;
    a.varlen = Some(Varlen {
        cu_seqlens_q: Seqlens::Host(cq.iter().map(|&x| x as i64).collect()),
        cu_seqlens_kv: Seqlens::Device(&tck),
        max_seqlen_q: 4,
        max_seqlen_kv: 5,
    });
    // SAFETY: as above.
    let outs = unsafe { attention(env(), &mut mem, &a) }.unwrap();
    assert!(outs[1].is_none());
    let want = attn_ref(&s, &wide(&q), &wide(&k), &wide(&v));
    assert_out_dtype(
        "varlen",
        "f16",
        &mem.get64::<f16>(slot(&outs, 0)),
        &want.out,
        32,
    );

    // fp8 dense with descales: bf16 out, against the reference on the dequantized inputs.
    let s = AttnShape::dense(1, 6, 6, 2, 2, 64, false);
    let quant = |v: Vec<f32>, d: f32| -> Vec<F8E4M3FN> {
        v.into_iter().map(|x| F8E4M3FN::quantize(x / d)).collect()
    };
    let (dq, dk, dv) = (0.05f32, 0.04f32, 0.03f32);
    let q = quant(rng.randn(s.q_len()), dq);
    let k = quant(rng.randn(s.kv_len()), dk);
    let v = quant(rng.randn(s.kv_len()), dv);
    let (tq, tk, tv) = (
        mem.put(&q, &[1, 6, 2, 64]),
        mem.put(&k, &[1, 6, 2, 64]),
        mem.put(&v, &[1, 6, 2, 64]),
    );
    let ds = [
        mem.put(&[dq], &[1]),
        mem.put(&[dk], &[1]),
        mem.put(&[dv], &[1]),
    ];
    let a = Attn {
        name: "flash_attn_fp8",
        q: &tq,
        k: &tk,
        v: &tv,
        descales: Some([&ds[0], &ds[1], &ds[2]]),
        varlen: None,
        causal: false,
        softmax_scale: None,
        num_kv_splits: None,
        kernel: "auto",
        return_lse: false,
        outs: [None, None],
    };
    // SAFETY: as above.
    let outs = unsafe { attention(env(), &mut mem, &a) }.unwrap();
    assert_eq!(slot(&outs, 0).dtype, Dtype::BF16);
    let deq =
        |v: &[F8E4M3FN], d: f32| -> Vec<f64> { v.iter().map(|x| x.f64() * d as f64).collect() };
    let want = attn_ref(&s, &deq(&q, dq), &deq(&k, dk), &deq(&v, dv));
    assert_out_dtype(
        "fp8",
        "bf16",
        &mem.get64::<bf16>(slot(&outs, 0)),
        &want.out,
        64,
    );
}

// ---- validation ----

/// A sentinel-filled f32 output of `n` elements and its descriptor.
fn sentinel(mem: &mut Mem, shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    mem.put(&vec![7.25f32; n as usize], shape)
}

fn unwritten(mem: &Mem, t: &Tensor) {
    assert!(
        mem.get::<f32>(t).iter().all(|&v| v == 7.25),
        "the output was written"
    );
}

/// The error of a softmax of `x` into a sentinel `out` (f32 `[4, 8]` unless `x` says
/// otherwise), which must stay unwritten.
fn softmax_err(mem: &mut Mem, x: &Tensor, out_shape: &[i64]) -> BindError {
    let out = sentinel(mem, out_shape);
    // SAFETY: the descriptors of valid tensors are live Sim allocations of `mem`; the invalid
    // ones are refused before any memory is touched (what the test checks).
    let e = unsafe { softmax(env(), &mut NoAlloc, x, Some(&out)) }.unwrap_err();
    unwritten(mem, &out);
    e
}

fn has(e: &BindError, kind: ErrorKind, parts: &[&str]) {
    assert_eq!(e.kind, kind, "{e}");
    for p in parts {
        assert!(e.message.contains(p), "{:?} lacks {p:?}", e.message);
    }
}

#[test]
fn bad_tensors_are_refused_by_name_before_anything_is_written() {
    let mut mem = Mem::default();
    let good = mem.put(&[1.0f32; 32], &[4, 8]);
    // Non-contiguous (a transposed view).
    let mut t = good.clone();
    t.shape = vec![8, 4];
    t.strides = vec![1, 8];
    let e = softmax_err(&mut mem, &t, &[8, 4]);
    has(
        &e,
        ErrorKind::Value,
        &[
            "flydsl.softmax: `x`",
            "strides [1, 8]",
            "contiguous",
            "x.contiguous()",
        ],
    );
    // Every other row: strides row-major in order but with a gap.
    let mut t = good.clone();
    t.shape = vec![2, 8];
    t.strides = vec![16, 1];
    has(
        &softmax_err(&mut mem, &t, &[2, 8]),
        ErrorKind::Value,
        &["contiguous"],
    );
    // A size-1 dimension's stride does not matter (torch's rule): accepted.
    let mut t = good.clone();
    t.shape = vec![4, 1, 8];
    t.strides = vec![8, 1234, 1];
    let out = sentinel(&mut mem, &[4, 1, 8]);
    // SAFETY: `t` and `out` describe live Sim allocations of `mem`.
    unsafe { softmax(env(), &mut NoAlloc, &t, Some(&out)) }.unwrap();
    assert!(mem
        .get::<f32>(&out)
        .iter()
        .all(|&v| (v - 0.125).abs() < 1e-6));
    // Misaligned start (a view starting one element into a row).
    let mut t = good.clone();
    t.ptr += 4;
    t.shape = vec![3, 7];
    t.strides = vec![7, 1];
    has(
        &softmax_err(&mut mem, &t, &[3, 7]),
        ErrorKind::Value,
        &["multiple of 16 bytes", "x.clone()"],
    );
    // Wrong dtype.
    let mut t = good.clone();
    t.dtype = "torch.int32".into();
    has(
        &softmax_err(&mut mem, &t, &[4, 8]),
        ErrorKind::Type,
        &[
            "dtype torch.int32",
            "torch.float32, torch.float16 or torch.bfloat16",
        ],
    );
    let mut t = good.clone();
    t.dtype = "torch.complex64".into();
    has(
        &softmax_err(&mut mem, &t, &[4, 8]),
        ErrorKind::Type,
        &["torch.complex64"],
    );
    // Wrong device type.
    let mut t = good.clone();
    t.device = "cpu".into();
    has(
        &softmax_err(&mut mem, &t, &[4, 8]),
        ErrorKind::Value,
        &["on cpu:0", "runs on sim tensors"],
    );
    // Negative sizes, mismatched ranks, sizes whose bytes overflow.
    let mut t = good.clone();
    t.shape = vec![-4, 8];
    has(
        &softmax_err(&mut mem, &t, &[4, 8]),
        ErrorKind::Value,
        &["non-negative"],
    );
    let mut t = good.clone();
    t.strides = vec![1];
    has(
        &softmax_err(&mut mem, &t, &[4, 8]),
        ErrorKind::Value,
        &["one entry per dimension"],
    );
    let mut t = good.clone();
    t.shape = vec![1 << 62, 8];
    t.strides = vec![8, 1];
    has(
        &softmax_err(&mut mem, &t, &[4, 8]),
        ErrorKind::Value,
        &["overflows 64 bits"],
    );
    // A descriptor larger than its allocation: the runtime's range check refuses it.
    let mut t = good.clone();
    t.shape = vec![8, 8];
    t.strides = vec![8, 1];
    has(
        &softmax_err(&mut mem, &t, &[8, 8]),
        ErrorKind::Value,
        &["flydsl.softmax", "not inside one allocation"],
    );
    // A null pointer with elements.
    let mut t = good.clone();
    t.ptr = 0;
    has(
        &softmax_err(&mut mem, &t, &[4, 8]),
        ErrorKind::Value,
        &["address 0"],
    );
    // The output of the wrong shape or dtype.
    has(
        &softmax_err(&mut mem, &good, &[8, 4]),
        ErrorKind::Value,
        &["`out`", "shape [4, 8]"],
    );
    // An output that overlaps the input (in place).
    // SAFETY: `good` is a live Sim allocation.
    let e = unsafe { softmax(env(), &mut NoAlloc, &good, Some(&good)) }.unwrap_err();
    has(
        &e,
        ErrorKind::Value,
        &["`out`", "overlaps `x`", "out of place"],
    );
    // Outputs left out with an allocator that refuses: nothing runs.
    // SAFETY: as above.
    assert!(unsafe { softmax(env(), &mut NoAlloc, &good, None) }.is_err());
}

#[test]
fn argument_rules_name_the_function_and_the_fix() {
    let mut mem = Mem::default();
    let x = mem.put(&[1.0f32; 32], &[4, 8]);
    let w7 = mem.put(&[1.0f32; 7], &[7]);
    let w8 = mem.put(&[1.0f32; 8], &[8]);
    let y = sentinel(&mut mem, &[4, 8]);
    let mut a = NormFwd {
        name: "rms_norm",
        norm: fly_norm::Norm::Rms,
        x: &x,
        residual: None,
        weight: &w7,
        bias: None,
        quant: false,
        xscale: None,
        stats: false,
        eps: 1e-5,
        outs: [Some(&y), None, None, None, None],
    };
    // SAFETY: every descriptor is a live Sim allocation of `mem`.
    let e = unsafe { norm_fwd(env(), &mut NoAlloc, &a) }.unwrap_err();
    has(
        &e,
        ErrorKind::Value,
        &["flydsl.rms_norm: `weight`", "shape [8]", "x.shape[-1]"],
    );
    // The kernel crate's own rules come through with the Python name first.
    a.weight = &w8;
    a.eps = 0.0;
    // SAFETY: as above.
    let e = unsafe { norm_fwd(env(), &mut NoAlloc, &a) }.unwrap_err();
    has(
        &e,
        ErrorKind::Value,
        &["flydsl.rms_norm: fly_norm::norm_fwd: `eps` = 0"],
    );
    unwritten(&mem, &y);
    // Tensors on two devices of one type.
    let mut other = w8.clone();
    other.index = Some(1);
    a.weight = &other;
    a.eps = 1e-5;
    // SAFETY: as above.
    let e = unsafe { norm_fwd(env(), &mut NoAlloc, &a) }.unwrap_err();
    has(
        &e,
        ErrorKind::Value,
        &["`weight`", "sim:1", "`x` is on sim:0"],
    );
    // GEMM: an activation without a bias, an unknown activation, mismatched k.
    let b = mem.put(&[bf16::ONE; 16 * 8], &[16, 8]);
    let a16 = mem.put(&[bf16::ONE; 32], &[4, 8]);
    let mut g = Gemm {
        name: "gemm",
        a: &a16,
        b: &b,
        scales: None,
        bias: None,
        activation: Some("relu"),
        b_preshuffled: false,
        out_dtype: None,
        out: None,
    };
    // SAFETY: as above.
    let e = unsafe { gemm(env(), &mut NoAlloc, &g) }.unwrap_err();
    has(
        &e,
        ErrorKind::Value,
        &["flydsl.gemm: `activation`", "pass a bias"],
    );
    g.activation = Some("tanh");
    // SAFETY: as above.
    let e = unsafe { gemm(env(), &mut NoAlloc, &g) }.unwrap_err();
    has(&e, ErrorKind::Value, &["\"tanh\" is not an activation"]);
    g.activation = None;
    g.a = &x; // f32 A
              // SAFETY: as above.
    let e = unsafe { gemm(env(), &mut NoAlloc, &g) }.unwrap_err();
    has(
        &e,
        ErrorKind::Type,
        &["`a`", "torch.bfloat16 or torch.float16"],
    );
    // Attention: a bad kernel name and a rank error.
    let q = mem.put(&[bf16::ONE; 64], &[2, 32]);
    let at = Attn {
        name: "flash_attn",
        q: &q,
        k: &q,
        v: &q,
        descales: None,
        varlen: None,
        causal: false,
        softmax_scale: None,
        num_kv_splits: None,
        kernel: "fastest",
        return_lse: false,
        outs: [None, None],
    };
    // SAFETY: as above.
    let e = unsafe { attention(env(), &mut NoAlloc, &at) }.unwrap_err();
    has(&e, ErrorKind::Value, &["`kernel` = \"fastest\""]);
    let at = Attn {
        kernel: "auto",
        ..at
    };
    // SAFETY: as above.
    let e = unsafe { attention(env(), &mut NoAlloc, &at) }.unwrap_err();
    has(
        &e,
        ErrorKind::Value,
        &["`q`", "4 dimensions", "[batch, seqlen, heads, head_dim]"],
    );
    // Varlen offsets past int32.
    let q3 = mem.put(&[bf16::ONE; 64], &[1, 2, 32]);
    let at = Attn {
        q: &q3,
        k: &q3,
        v: &q3,
        varlen: Some(Varlen {
            cu_seqlens_q: Seqlens::Host(vec![0, 1 << 40]),
            cu_seqlens_kv: Seqlens::Host(vec![0, 1]),
            max_seqlen_q: 1,
            max_seqlen_kv: 1,
        }),
        ..at
    };
    // SAFETY: as above.
    let e = unsafe { attention(env(), &mut NoAlloc, &at) }.unwrap_err();
    has(
        &e,
        ErrorKind::Value,
        &["`cu_seqlens_q` = 1099511627776", "int32"],
    );
}
