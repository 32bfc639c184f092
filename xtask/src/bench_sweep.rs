//! `cargo xtask bench --sweep FILE`: time every op of one family at each shape of a sweep file
//! that `bench/sweep.py gen` wrote (a seeded grid of shapes and dtypes), so our kernels and
//! the torch peers (`bench/sweep.py peers`) run on the same list; `bench/sweep.py report`
//! pairs the two.
//!
//! The file: `{"family": "norm" | "softmax", "seed": S, "shapes": [{"dtype": "bf16",
//! "m": M, "n": N, "class": "..."}, ...]}`. Norm shapes time RMSNorm and LayerNorm forward
//! and backward; softmax shapes the forward and the backward.

use crate::bench_ctx::{report, Ctx, R};
use crate::elem::{parse_dtype, Dtype};
use flydsl_rt::half::{bf16, f16};
use flydsl_testutil::compare::Storage;
use std::path::Path;

/// One shape of a sweep file.
struct Case {
    dtype: Dtype,
    shape: (usize, usize),
}

/// The family and the cases of a sweep file.
fn read(path: &Path) -> R<(String, Vec<Case>)> {
    let text =
        std::fs::read_to_string(path).map_err(|x| format!("--sweep {}: {x}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .map_err(|x| format!("--sweep {}: not JSON: {x}", path.display()))?;
    let bad = |what: &str| {
        format!(
            "--sweep {}: {what} (expected the file `bench/sweep.py gen` writes)",
            path.display()
        )
    };
    let family = doc["family"]
        .as_str()
        .ok_or_else(|| bad("no \"family\""))?
        .to_string();
    let shapes = doc["shapes"]
        .as_array()
        .ok_or_else(|| bad("no \"shapes\" list"))?;
    let mut cases = Vec::with_capacity(shapes.len());
    for s in shapes {
        let dim = |k: &str| {
            s[k].as_u64()
                .filter(|&v| v >= 1)
                .map(|v| v as usize)
                .ok_or_else(|| bad(&format!("a shape without a positive \"{k}\": {s}")))
        };
        let dtype = s["dtype"]
            .as_str()
            .ok_or_else(|| bad("a shape without \"dtype\""))
            .and_then(|d| parse_dtype(d).map_err(|x| bad(&x)))?;
        cases.push(Case {
            dtype,
            shape: (dim("m")?, dim("n")?),
        });
    }
    Ok((family, cases))
}

/// RMSNorm and LayerNorm, forward and backward, at one shape.
fn norm<T: fly_norm::Element + Storage>(c: &mut Ctx, dt: Dtype, sh: (usize, usize)) {
    report("norm_fwd", sh, crate::bench_norm::fwd::<T>(c, dt, sh));
    report("norm_bwd", sh, crate::bench_norm::bwd::<T>(c, dt, sh));
}

/// Softmax forward and backward at one shape.
fn softmax<T: fly_softmax::Element + Storage>(c: &mut Ctx, dt: Dtype, sh: (usize, usize)) {
    report(
        "softmax_fwd",
        sh,
        crate::bench_softmax::softmax_fwd::<T>(c, dt, sh),
    );
    report(
        "softmax_bwd",
        sh,
        crate::bench_softmax::softmax_bwd::<T>(c, dt, sh),
    );
}

/// Time every op of the sweep file's family at each of its shapes.
pub fn run(c: &mut Ctx, path: &Path) -> R<()> {
    let (family, cases) = read(path)?;
    if !["norm", "softmax"].contains(&family.as_str()) {
        return Err(format!(
            "--sweep {}: family `{family}` has no sweep (expected norm or softmax)",
            path.display()
        ));
    }
    eprintln!(
        "sweep: {} {family} shapes from {}",
        cases.len(),
        path.display()
    );
    for (i, case) in cases.iter().enumerate() {
        let (dt, sh) = (case.dtype, case.shape);
        eprintln!(
            "sweep {}/{}: {} {}x{}",
            i + 1,
            cases.len(),
            dt.name(),
            sh.0,
            sh.1
        );
        match (family.as_str(), dt) {
            ("norm", Dtype::BF16) => norm::<bf16>(c, dt, sh),
            ("norm", Dtype::F16) => norm::<f16>(c, dt, sh),
            ("norm", Dtype::F32) => norm::<f32>(c, dt, sh),
            (_, Dtype::BF16) => softmax::<bf16>(c, dt, sh),
            (_, Dtype::F16) => softmax::<f16>(c, dt, sh),
            (_, Dtype::F32) => softmax::<f32>(c, dt, sh),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::read;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("fly-sweep-{}-{name}.json", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_sweep_file_gives_its_family_and_shapes() {
        let p = file(
            "ok",
            r#"{"family": "norm", "seed": 3, "shapes": [
                {"dtype": "bf16", "m": 7, "n": 1021, "class": "ragged"},
                {"dtype": "f32", "m": 1, "n": 4, "class": "regular"}]}"#,
        );
        let (fam, cases) = read(&p).unwrap();
        assert_eq!(fam, "norm");
        let got: Vec<_> = cases.iter().map(|c| (c.dtype.name(), c.shape)).collect();
        assert_eq!(got, [("bf16", (7, 1021)), ("f32", (1, 4))]);
    }

    #[test]
    fn a_bad_sweep_file_is_an_error_naming_the_flag_and_the_entry() {
        for (name, text, says) in [
            ("nojson", "{", "not JSON"),
            ("nofam", r#"{"shapes": []}"#, "no \"family\""),
            (
                "zero",
                r#"{"family": "softmax", "shapes": [{"dtype": "f16", "m": 0, "n": 3}]}"#,
                "\"m\"",
            ),
            (
                "dtype",
                r#"{"family": "softmax", "shapes": [{"dtype": "i8", "m": 2, "n": 3}]}"#,
                "i8",
            ),
        ] {
            let e = read(&file(name, text)).err().expect(name);
            assert!(e.contains("--sweep") && e.contains(says), "{name}: {e}");
        }
    }
}
