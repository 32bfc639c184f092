//! Failed calls name the public function and the argument and leave every output unchanged;
//! what softmax returns for rows of all -inf.

use fly_softmax::plan::{all, variant_by_name};
use fly_softmax::table::{Kind, Path};
use fly_softmax::{
    softmax, softmax_backward, softmax_backward_with, softmax_with, Dispatch, SoftmaxArgs,
};
use flydsl_rt::{Device, DeviceBuffer, Element, Result, Stream, Target};

fn sentinel(i: usize) -> f32 {
    0.5 + (i % 5) as f32 * 0.125
}

/// Which argument is made wrong.
#[derive(Clone, Copy, Debug)]
enum Bad {
    /// One element too many.
    Len(&'static str),
    /// On a second Sim device (a distinct device of the same target).
    Device(&'static str),
    /// A configuration of the other direction.
    Dispatch,
    /// No rows can have zero elements.
    NZero,
}

const M: usize = 3;
const N: usize = 64;

fn buf(s: &Stream, other: &Device, bad: Bad, name: &str) -> DeviceBuffer<f32> {
    let (dev, len) = match bad {
        Bad::Len(b) if b == name => (s.device(), M * N + 1),
        Bad::Device(b) if b == name => (other, M * N),
        _ => (s.device(), M * N),
    };
    let v: Vec<f32> = (0..len).map(sentinel).collect();
    DeviceBuffer::from_slice(dev, &v).unwrap()
}

fn untouched(b: &DeviceBuffer<f32>) -> bool {
    b.to_vec()
        .unwrap()
        .iter()
        .enumerate()
        .all(|(i, &v)| v == sentinel(i))
}

fn args(bad: Bad) -> SoftmaxArgs {
    match bad {
        Bad::NZero => SoftmaxArgs { m: M, n: 0 },
        _ => SoftmaxArgs { m: M, n: N },
    }
}

fn check(name: &str, bad: Bad, r: Result<()>, needle: &str, out: &DeviceBuffer<f32>) {
    let e = r
        .expect_err(&format!("{name} with {bad:?} must fail"))
        .to_string();
    assert!(e.starts_with(&format!("{name}: ")), "{bad:?}: {e}");
    assert!(
        e.contains(needle),
        "{bad:?}: the error must name {needle}: {e}"
    );
    assert!(untouched(out), "{name} with {bad:?} wrote its output");
}

fn needle(bad: Bad) -> String {
    match bad {
        Bad::Len(a) | Bad::Device(a) => format!("`{a}`"),
        Bad::Dispatch => "`dispatch`".into(),
        Bad::NZero => "`n`".into(),
    }
}

#[test]
fn failed_forward_calls_leave_y_unchanged() {
    let s = Device::sim(Target::Gfx942).stream().unwrap();
    let other = Device::new_sim(Target::Gfx942);
    let bwd = all(Kind::Backward)[0].name::<f32>();
    let mut cases = vec![Bad::Dispatch, Bad::NZero];
    for a in ["x", "y"] {
        cases.extend([Bad::Len(a), Bad::Device(a)]);
    }
    for bad in cases {
        let x = buf(&s, &other, bad, "x");
        let mut y = buf(&s, &other, bad, "y");
        let dispatch = match bad {
            Bad::Dispatch => Dispatch::Variant(&bwd),
            _ => Dispatch::Default,
        };
        let r = softmax_with(&s, &x, &mut y, args(bad), dispatch);
        check("fly_softmax::softmax_with", bad, r, &needle(bad), &y);
        if !matches!(bad, Bad::Dispatch) {
            let r = softmax(&s, &x, &mut y, args(bad));
            check("fly_softmax::softmax", bad, r, &needle(bad), &y);
        }
    }
}

#[test]
fn failed_backward_calls_leave_dx_unchanged() {
    let s = Device::sim(Target::Sm90).stream().unwrap();
    let other = Device::new_sim(Target::Sm90);
    let fwd = all(Kind::Forward)[0].name::<f32>();
    let mut cases = vec![Bad::Dispatch, Bad::NZero];
    for a in ["y", "dy", "dx"] {
        cases.extend([Bad::Len(a), Bad::Device(a)]);
    }
    for bad in cases {
        let y = buf(&s, &other, bad, "y");
        let dy = buf(&s, &other, bad, "dy");
        let mut dx = buf(&s, &other, bad, "dx");
        let dispatch = match bad {
            Bad::Dispatch => Dispatch::Variant(&fwd),
            _ => Dispatch::Default,
        };
        let r = softmax_backward_with(&s, &y, &dy, &mut dx, args(bad), dispatch);
        check(
            "fly_softmax::softmax_backward_with",
            bad,
            r,
            &needle(bad),
            &dx,
        );
        if !matches!(bad, Bad::Dispatch) {
            let r = softmax_backward(&s, &y, &dy, &mut dx, args(bad));
            check("fly_softmax::softmax_backward", bad, r, &needle(bad), &dx);
        }
    }
}

/// Softmax of a row of all -inf on every path and dtype, next to a finite row.
fn all_neg_inf<T: Element>(s: &Stream) -> Vec<(String, Vec<f32>)> {
    let mut out = Vec::new();
    for v in all(Kind::Forward) {
        let name = v.name::<T>();
        let n = match v.config.path {
            Path::Vector | Path::Scalar | Path::Ragged => v.config.class as usize,
            Path::LoopVector | Path::LoopScalar | Path::LoopRagged | Path::Split => 40000,
        };
        let n = if !v.config.path.needs_whole_vectors() {
            n - 1
        } else {
            n
        };
        if !v.supports::<T>(n)
            || !v.available::<T>(s.device())
            || variant_by_name::<T>(&name).is_none()
        {
            continue;
        }
        let mut x = vec![T::from_f32(f32::NEG_INFINITY); n];
        x.extend((0..n).map(|i| T::from_f32((i % 7) as f32)));
        let xd = DeviceBuffer::from_slice(s.device(), &x).unwrap();
        let mut y = DeviceBuffer::<T>::zeroed(s.device(), 2 * n).unwrap();
        softmax_with(
            s,
            &xd,
            &mut y,
            SoftmaxArgs { m: 2, n },
            Dispatch::Variant(&name),
        )
        .unwrap();
        out.push((
            name,
            y.to_vec().unwrap().iter().map(|v| v.to_f32()).collect(),
        ));
    }
    out
}

/// A row of all -inf comes back as NaN in every element, as torch.softmax gives (the row
/// max is -inf and -inf - (-inf) is NaN), on every path, dtype and wave size; the finite row
/// next to it is unaffected.
#[test]
fn all_neg_inf_rows_are_nan() {
    fn check<T: Element>(t: Target) {
        let s = Device::sim(t).stream().unwrap();
        let results = all_neg_inf::<T>(&s);
        assert!(
            results.len() > 20,
            "{t}: too few variants ran: {}",
            results.len()
        );
        for (name, y) in results {
            let n = y.len() / 2;
            assert!(
                y[..n].iter().all(|v| v.is_nan()),
                "{t} {name}: {:?}",
                &y[..4]
            );
            let sum: f32 = y[n..].iter().sum();
            assert!(y[n..].iter().all(|v| v.is_finite()), "{t} {name}");
            assert!(
                (sum - 1.0).abs() < 0.05,
                "{t} {name}: finite row sums to {sum}"
            );
        }
    }
    for t in [Target::Gfx942, Target::Sm90] {
        check::<f32>(t);
        check::<half::bf16>(t);
    }
}
