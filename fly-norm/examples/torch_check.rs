//! Cross-check against torch, our half: on the best device, runs every public fly-norm
//! variant (LayerNorm and RMSNorm forward, with mean / rstd, fused residual add, dynamic and
//! smooth int8 quant, fused add + quant, backward with the atomic and the two-stage weight
//! gradient sums, and RMSNorm's fused-add backward with `dresidual`) for every activation dtype
//! (f32, f16, bf16, and f32 weights with f16 / bf16 activations for RMSNorm) on shapes that
//! take the multi-row, fast and generic paths, on deterministic inputs. Writes the inputs and
//! our outputs as raw little-endian files into `--out DIR`, with a `manifest.json` naming for
//! every case the op, norm, dtypes, shape, eps, options, the kernel path the dispatcher took,
//! every input and output file (element type and shape) and each output's tolerance (from
//! `flydsl_testutil::norm::Tol`, the numbers of `shared/facts/kernels.md`).
//! `bench/torch_check.py DIR` then computes torch's results on the same inputs and compares.
//!
//! ```sh
//! cargo run --release -p fly-norm --features sm90 --example torch_check -- --out /tmp/tc
//! python3 bench/torch_check.py /tmp/tc
//! ```
//!
//! Exits 0 with a reason printed, writing nothing, when there is no GPU (the best device is
//! the Sim) or the crate was built without the device's code objects; with
//! `FLYDSL_REQUIRE_GPU` set (the device bundle sets it) such a skip exits 1 instead. `--sim`
//! runs on the Sim anyway (`FLYDSL_SIM_TARGET` picks its target) and `--quick` uses three
//! small shapes, for a smoke test of the harness. A case whose call fails is written with its
//! error (the script counts it as failed) and makes the exit status 1.
//!
//! Output tolerances: forward `y` and backward `dx` as the CPU-reference tests
//! (`atol + rtol * |ref|`), `residual_out` exact, `mean` / `rstd` 1e-4 + 1e-4 relative,
//! `yscale` 1e-3 and `q` within 1, weight gradients the `dw` pair plus half an ulp of the
//! weight dtype (they are rounded to it).

use fly_norm::{
    layer_norm, layer_norm_add, layer_norm_add_quant, layer_norm_bwd, layer_norm_quant,
    layer_norm_stats, norm_fwd, plan_backward, plan_forward, rms_norm, rms_norm_add,
    rms_norm_add_quant, rms_norm_bwd, rms_norm_quant, rms_norm_rstd, BwdStrategy, DType, Element,
    FwdBuffers, FwdOut, Norm, NormArgs, NormBwdArgs,
};
use flydsl_rt::{Backend, Device, DeviceBuffer, DeviceRepr, Stream};
use flydsl_testutil::norm::{NormDtype, Tol};
use flydsl_testutil::rng::Rng;
use half::{bf16, f16};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Instant;

/// Shapes on an H200 (wave32; vectors of 4 f32 or 8 16-bit elements): (64, 256) multi-row
/// (`Rows(1)` 16-bit, `Rows(4)` f32), (37, 1024) multi-row 16-bit / fast f32, (12, 2048),
/// (16, 5120) and (4, 16384) fast with 2..8 tiles, (8, 1021) generic.
const SHAPES: [(usize, usize); 6] = [
    (64, 256),
    (37, 1024),
    (12, 2048),
    (16, 5120),
    (4, 16384),
    (8, 1021),
];
/// `--quick`: one shape of each path class, small enough for the Sim.
const QUICK_SHAPES: [(usize, usize); 3] = [(5, 256), (3, 1024), (2, 1021)];

/// Errors of the runtime and of writing the files.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Opts {
    out: PathBuf,
    sim: bool,
    quick: bool,
}

fn usage() -> String {
    "usage: torch_check --out DIR [--sim] [--quick]".into()
}

fn parse_args() -> std::result::Result<Opts, String> {
    let mut out = None;
    let (mut sim, mut quick) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => {
                out = Some(PathBuf::from(
                    args.next()
                        .ok_or(format!("--out needs a folder; {}", usage()))?,
                ))
            }
            "--sim" => sim = true,
            "--quick" => quick = true,
            "-h" | "--help" => return Err(usage()),
            _ => return Err(format!("unknown argument `{a}`; {}", usage())),
        }
    }
    let out = out.ok_or(format!("--out DIR is required; {}", usage()))?;
    Ok(Opts { out, sim, quick })
}

/// An element type written to the raw files: its name in the manifest and its little-endian
/// bytes.
trait Raw: DeviceRepr + Copy {
    /// The manifest's name of the element type.
    const NAME: &'static str;
    /// Append the little-endian bytes of `self`.
    fn put(self, out: &mut Vec<u8>);
}

impl Raw for f32 {
    const NAME: &'static str = "f32";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl Raw for f16 {
    const NAME: &'static str = "f16";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_le_bytes());
    }
}
impl Raw for bf16 {
    const NAME: &'static str = "bf16";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_le_bytes());
    }
}
impl Raw for i8 {
    const NAME: &'static str = "i8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Half an ulp at 1 of a weight dtype (weight gradients are rounded to it).
fn half_ulp(d: DType) -> f64 {
    match d {
        DType::F32 => 0.0,
        DType::F16 => 1.0 / 2048.0,
        DType::BF16 => 1.0 / 256.0,
    }
}

/// The output folder: the raw files and the manifest's case entries.
struct Writer {
    dir: PathBuf,
    cases: Vec<Value>,
    bytes: u64,
    errors: usize,
}

impl Writer {
    /// Write `data` (shape `shape`) as `{name}.bin`; returns the manifest's tensor object.
    fn file<E: Raw>(&mut self, name: &str, data: &[E], shape: &[usize]) -> Result<Value> {
        let mut bytes = Vec::with_capacity(std::mem::size_of_val(data));
        for &v in data {
            v.put(&mut bytes);
        }
        let file = format!("{name}.bin");
        let path = self.dir.join(&file);
        std::fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        self.bytes += bytes.len() as u64;
        Ok(json!({"file": file, "dtype": E::NAME, "shape": shape}))
    }
}

/// One output of a case: its name, buffer and tolerance.
struct Out<'a, E: DeviceRepr> {
    name: &'static str,
    buf: &'a DeviceBuffer<E>,
    shape: Vec<usize>,
    atol: f64,
    rtol: f64,
}

/// Download `o` and return its manifest entry: its name, and its tensor object with the
/// tolerance.
fn output<E: Raw>(w: &mut Writer, case: &str, o: Out<'_, E>) -> Result<(&'static str, Value)> {
    let data = o.buf.to_vec()?;
    let mut t = w.file(&format!("{case}_{}", o.name), &data, &o.shape)?;
    t["atol"] = json!(o.atol);
    t["rtol"] = json!(o.rtol);
    Ok((o.name, t))
}

/// Which forward variant.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fwd {
    /// `layer_norm` / `rms_norm`.
    Plain,
    /// `layer_norm_stats` (mean, rstd) / `rms_norm_rstd`.
    Stats,
    /// The fused residual add.
    Add,
    /// `true`: smooth quant.
    Quant(bool),
    /// `true`: smooth quant.
    AddQuant(bool),
}

impl Fwd {
    const ALL: [Fwd; 7] = [
        Fwd::Plain,
        Fwd::Stats,
        Fwd::Add,
        Fwd::Quant(false),
        Fwd::Quant(true),
        Fwd::AddQuant(false),
        Fwd::AddQuant(true),
    ];
    /// The public function's name.
    fn op(self, norm: Norm) -> String {
        let base = match norm {
            Norm::Layer => "layer_norm",
            Norm::Rms => "rms_norm",
        };
        let suffix = match (self, norm) {
            (Fwd::Plain, _) => "",
            (Fwd::Stats, Norm::Layer) => "_stats",
            (Fwd::Stats, Norm::Rms) => "_rstd",
            (Fwd::Add, _) => "_add",
            (Fwd::Quant(_), _) => "_quant",
            (Fwd::AddQuant(_), _) => "_add_quant",
        };
        format!("{base}{suffix}")
    }
    fn residual(self) -> bool {
        matches!(self, Fwd::Add | Fwd::AddQuant(_))
    }
    fn quant(self) -> &'static str {
        match self {
            Fwd::Quant(false) | Fwd::AddQuant(false) => "dynamic",
            Fwd::Quant(true) | Fwd::AddQuant(true) => "smooth",
            _ => "none",
        }
    }
}

/// Which backward variant: the strategy, and whether it is RMSNorm's fused-add backward.
#[derive(Clone, Copy, Debug)]
struct Bwd {
    strategy: BwdStrategy,
    dresidual: bool,
}

/// The inputs of one (norm, dtypes, shape) group, on the device and as manifest entries.
struct Group<T: Element, W: Element> {
    norm: Norm,
    m: usize,
    n: usize,
    eps: f32,
    tag: String,
    tol: Tol,
    x: DeviceBuffer<T>,
    res: DeviceBuffer<T>,
    gamma: DeviceBuffer<W>,
    beta: DeviceBuffer<W>,
    xscale: DeviceBuffer<f32>,
    dy: DeviceBuffer<T>,
    dres: DeviceBuffer<T>,
    /// Manifest tensor objects by input name.
    files: Vec<(&'static str, Value)>,
}

/// A per-row statistic's output (`mean`, `rstd`): 1e-4 absolute and relative, as the tests.
fn stat<'a>(name: &'static str, buf: &'a DeviceBuffer<f32>, m: usize) -> Out<'a, f32> {
    Out {
        name,
        buf,
        shape: vec![m],
        atol: 1e-4,
        rtol: 1e-4,
    }
}

/// A device buffer of `len` NaNs (outputs start as NaN, so an element left unwritten fails).
fn nan_buf<T: Element>(dev: &Device, len: usize) -> Result<DeviceBuffer<T>> {
    Ok(DeviceBuffer::from_slice(
        dev,
        &vec![T::from_f32(f32::NAN); len],
    )?)
}

/// Common fields of a case's manifest entry.
#[allow(clippy::too_many_arguments)]
fn case_head<T: Element, W: Element>(
    g: &Group<T, W>,
    name: &str,
    op: &str,
    dir: &str,
    path: &str,
    beta: bool,
    residual: bool,
    quant: &str,
    stats: bool,
    strategy: Option<BwdStrategy>,
    dresidual: bool,
) -> Value {
    let strategy = strategy.map(|s| match s {
        BwdStrategy::Atomic => "atomic",
        BwdStrategy::TwoStage => "two_stage",
        BwdStrategy::Auto => "auto",
    });
    json!({
        "name": name, "op": op, "dir": dir, "norm": g.norm.name(),
        "dtype": T::DTYPE.name(), "wdtype": W::DTYPE.name(), "m": g.m, "n": g.n,
        "eps": g.eps as f64, "path": path, "beta": beta, "residual": residual, "quant": quant,
        "stats": stats, "strategy": strategy, "dresidual": dresidual,
    })
}

/// The manifest's `inputs` object: the group's tensor objects named in `names`.
fn inputs_json(g: &Group<impl Element, impl Element>, names: &[&str]) -> Value {
    let inputs: Map<String, Value> = g
        .files
        .iter()
        .filter(|(k, _)| names.contains(k))
        .map(|(k, t)| (k.to_string(), t.clone()))
        .collect();
    Value::Object(inputs)
}

/// Run one forward case and return its outputs' manifest entries.
fn run_fwd<T: Element + Raw, W: Element>(
    s: &Stream,
    w: &mut Writer,
    g: &Group<T, W>,
    op: Fwd,
    case: &str,
) -> Result<Vec<(&'static str, Value)>> {
    let dev = s.device();
    let (m, n) = (g.m, g.n);
    let layer = g.norm == Norm::Layer;
    let mut y = nan_buf::<T>(dev, m * n)?;
    let mut ro = nan_buf::<T>(dev, m * n)?;
    let (mut mean, mut rstd) = (nan_buf::<f32>(dev, m)?, nan_buf::<f32>(dev, m)?);
    let mut q = DeviceBuffer::from_slice(dev, &vec![i8::MIN; m * n])?; // never a valid q
    let mut ys = nan_buf::<f32>(dev, m)?;
    // LayerNorm: the plain fused add runs without a bias, everything else with one.
    let beta = (layer && op != Fwd::Add).then_some(&g.beta);
    let args = NormArgs { m, n, eps: g.eps };
    let xs = |smooth: bool| smooth.then_some(&g.xscale);
    let (x, r, gm) = (&g.x, &g.res, &g.gamma);
    match (g.norm, op) {
        (Norm::Layer, Fwd::Plain) => layer_norm(s, x, gm, beta, &mut y, args),
        (Norm::Layer, Fwd::Stats) => {
            layer_norm_stats(s, x, gm, beta, &mut y, &mut mean, &mut rstd, args)
        }
        (Norm::Layer, Fwd::Add) => layer_norm_add(s, x, r, gm, beta, &mut y, &mut ro, args),
        (Norm::Layer, Fwd::Quant(sm)) => {
            layer_norm_quant(s, x, gm, beta, xs(sm), &mut q, &mut ys, args)
        }
        (Norm::Layer, Fwd::AddQuant(sm)) => {
            layer_norm_add_quant(s, x, r, gm, beta, xs(sm), &mut q, &mut ys, &mut ro, args)
        }
        (Norm::Rms, Fwd::Plain) => rms_norm(s, x, gm, &mut y, args),
        (Norm::Rms, Fwd::Stats) => rms_norm_rstd(s, x, gm, &mut y, &mut rstd, args),
        (Norm::Rms, Fwd::Add) => rms_norm_add(s, x, r, gm, &mut y, &mut ro, args),
        (Norm::Rms, Fwd::Quant(sm)) => rms_norm_quant(s, x, gm, xs(sm), &mut q, &mut ys, args),
        (Norm::Rms, Fwd::AddQuant(sm)) => {
            rms_norm_add_quant(s, x, r, gm, xs(sm), &mut q, &mut ys, &mut ro, args)
        }
    }?;
    s.synchronize()?;
    let tol = g.tol;
    let mut outs = Vec::new();
    if op.quant() == "none" {
        outs.push(output(
            w,
            case,
            Out {
                name: "y",
                buf: &y,
                shape: vec![m, n],
                atol: tol.fwd_atol,
                rtol: tol.fwd_rtol,
            },
        )?);
    } else {
        outs.push(output(
            w,
            case,
            Out {
                name: "q",
                buf: &q,
                shape: vec![m, n],
                atol: tol.q as f64,
                rtol: 0.0,
            },
        )?);
        outs.push(output(
            w,
            case,
            Out {
                name: "yscale",
                buf: &ys,
                shape: vec![m],
                atol: tol.yscale,
                rtol: 0.0,
            },
        )?);
    }
    if op.residual() {
        outs.push(output(
            w,
            case,
            Out {
                name: "residual_out",
                buf: &ro,
                shape: vec![m, n],
                atol: 0.0,
                rtol: 0.0,
            },
        )?);
    }
    if op == Fwd::Stats {
        if layer {
            outs.push(output(w, case, stat("mean", &mean, m))?);
        }
        outs.push(output(w, case, stat("rstd", &rstd, m))?);
    }
    Ok(outs)
}

/// Run one backward case (the forward with statistics, then the backward) and return its
/// outputs' manifest entries.
fn run_bwd<T: Element + Raw, W: Element + Raw>(
    s: &Stream,
    w: &mut Writer,
    g: &Group<T, W>,
    b: Bwd,
    case: &str,
) -> Result<Vec<(&'static str, Value)>> {
    let dev = s.device();
    let (m, n) = (g.m, g.n);
    let layer = g.norm == Norm::Layer;
    let fargs = NormArgs { m, n, eps: g.eps };
    let args = NormBwdArgs {
        m,
        n,
        strategy: b.strategy,
    };
    let mut y = nan_buf::<T>(dev, m * n)?;
    let mut ro = nan_buf::<T>(dev, m * n)?;
    let (mut mean, mut rstd) = (nan_buf::<f32>(dev, m)?, nan_buf::<f32>(dev, m)?);
    let mut dx = nan_buf::<T>(dev, m * n)?;
    let mut dg = nan_buf::<W>(dev, n)?;
    let mut db = nan_buf::<W>(dev, n)?;
    let (x, gm) = (&g.x, &g.gamma);
    if layer {
        let beta = Some(&g.beta);
        layer_norm_stats(s, x, gm, beta, &mut y, &mut mean, &mut rstd, fargs)?;
        layer_norm_bwd(
            s, x, gm, &g.dy, &mean, &rstd, &mut dx, &mut dg, &mut db, args,
        )?;
    } else if b.dresidual {
        // The fused add's forward with rstd (no named function writes both), then the
        // backward of the normalised `residual_out` plus the gradient arriving at it.
        let bufs = FwdBuffers {
            x,
            residual: Some((&g.res, &mut ro)),
            gamma: gm,
            beta: None,
            out: FwdOut::Y(&mut y),
            mean: None,
            rstd: Some(&mut rstd),
        };
        norm_fwd(s, Norm::Rms, bufs, fargs)?;
        rms_norm_bwd(
            s,
            &ro,
            gm,
            &g.dy,
            &rstd,
            Some(&g.dres),
            &mut dx,
            &mut dg,
            args,
        )?;
    } else {
        rms_norm_rstd(s, x, gm, &mut y, &mut rstd, fargs)?;
        rms_norm_bwd(s, x, gm, &g.dy, &rstd, None, &mut dx, &mut dg, args)?;
    }
    s.synchronize()?;
    let tol = g.tol;
    let dw_rtol = tol.dw_rtol + half_ulp(W::DTYPE);
    let mut outs = vec![
        output(
            w,
            case,
            Out {
                name: "dx",
                buf: &dx,
                shape: vec![m, n],
                atol: tol.dx_atol,
                rtol: tol.dx_rtol,
            },
        )?,
        output(
            w,
            case,
            Out {
                name: "dgamma",
                buf: &dg,
                shape: vec![n],
                atol: tol.dw_atol,
                rtol: dw_rtol,
            },
        )?,
    ];
    if layer {
        outs.push(output(
            w,
            case,
            Out {
                name: "dbeta",
                buf: &db,
                shape: vec![n],
                atol: tol.dw_atol,
                rtol: dw_rtol,
            },
        )?);
    }
    Ok(outs)
}

/// Counts of the run.
#[derive(Default)]
struct Counts {
    cases: usize,
    groups: usize,
}

/// Every case of one (norm, activation dtype, weight dtype, shape) group.
fn group<T: Element + NormDtype + Raw, W: Element + Raw>(
    s: &Stream,
    w: &mut Writer,
    c: &mut Counts,
    norm: Norm,
    (m, n): (usize, usize),
) -> Result<()> {
    let dev = s.device();
    c.groups += 1;
    let tag = format!(
        "{}_{}_w{}_{m}x{n}",
        norm.name(),
        T::DTYPE.name(),
        W::DTYPE.name()
    );
    let mut rng = Rng::new(0x7c00 + c.groups as u64);
    let cast = |v: Vec<f32>| -> Vec<T> { v.into_iter().map(<T as Element>::from_f32).collect() };
    let castw = |v: Vec<f32>| -> Vec<W> { v.into_iter().map(W::from_f32).collect() };
    // As the reference suite: randn activations and gradients, rand weights; smooth-quant
    // scales in [0.5, 1.5).
    let x = cast(rng.randn(m * n));
    let res = cast(rng.randn(m * n));
    let gamma = castw(rng.rand(n));
    let beta = castw(rng.rand(n));
    let xscale: Vec<f32> = rng.rand(n).into_iter().map(|v| v + 0.5).collect();
    let dy = cast(rng.randn(m * n));
    let dres = cast(rng.randn(m * n));
    let mut files = vec![
        ("x", w.file(&format!("{tag}_x"), &x, &[m, n])?),
        (
            "residual",
            w.file(&format!("{tag}_residual"), &res, &[m, n])?,
        ),
        ("gamma", w.file(&format!("{tag}_gamma"), &gamma, &[n])?),
        ("xscale", w.file(&format!("{tag}_xscale"), &xscale, &[n])?),
        ("dy", w.file(&format!("{tag}_dy"), &dy, &[m, n])?),
    ];
    if norm == Norm::Layer {
        files.push(("beta", w.file(&format!("{tag}_beta"), &beta, &[n])?));
    } else {
        files.push((
            "dresidual",
            w.file(&format!("{tag}_dresidual"), &dres, &[m, n])?,
        ));
    }
    let tol = if W::DTYPE == DType::F32 {
        T::TOL_F32_WEIGHT
    } else {
        T::TOL
    };
    let g = Group {
        norm,
        m,
        n,
        // Callers of RMSNorm often pass 1e-6; LayerNorm keeps the default.
        eps: if norm == Norm::Rms { 1e-6 } else { 1e-5 },
        tag,
        tol,
        x: DeviceBuffer::from_slice(dev, &x)?,
        res: DeviceBuffer::from_slice(dev, &res)?,
        gamma: DeviceBuffer::from_slice(dev, &gamma)?,
        beta: DeviceBuffer::from_slice(dev, &beta)?,
        xscale: DeviceBuffer::from_slice(dev, &xscale)?,
        dy: DeviceBuffer::from_slice(dev, &dy)?,
        dres: DeviceBuffer::from_slice(dev, &dres)?,
        files,
    };
    let layer = norm == Norm::Layer;
    let (ws, cus) = (dev.wave_size(), dev.compute_units());
    for op in Fwd::ALL {
        let quant = op.quant() != "none";
        let path = format!(
            "{:?}",
            plan_forward(norm, m, n, T::DTYPE, quant, ws, cus).path
        );
        let case = format!("{}_{:?}", g.tag, op)
            .replace(['(', ')'], "_")
            .to_lowercase();
        let name = format!(
            "{} {}/{} {m}x{n}{}",
            op.op(norm),
            T::DTYPE.name(),
            W::DTYPE.name(),
            match op {
                Fwd::Quant(true) | Fwd::AddQuant(true) => " smooth",
                Fwd::Quant(false) | Fwd::AddQuant(false) => " dynamic",
                _ => "",
            }
        );
        let beta = layer && op != Fwd::Add;
        let mut inputs = vec!["x", "gamma"];
        if beta {
            inputs.push("beta");
        }
        if op.residual() {
            inputs.push("residual");
        }
        if op.quant() == "smooth" {
            inputs.push("xscale");
        }
        let head = case_head(
            &g,
            &name,
            &op.op(norm),
            "fwd",
            &path,
            beta,
            op.residual(),
            op.quant(),
            op == Fwd::Stats,
            None,
            false,
        );
        let result = run_fwd(s, w, &g, op, &case);
        finish(w, c, head, inputs_json(&g, &inputs), result);
    }
    let mut bwds = vec![
        Bwd {
            strategy: BwdStrategy::Atomic,
            dresidual: false,
        },
        Bwd {
            strategy: BwdStrategy::TwoStage,
            dresidual: false,
        },
    ];
    if !layer {
        for strategy in [BwdStrategy::Atomic, BwdStrategy::TwoStage] {
            bwds.push(Bwd {
                strategy,
                dresidual: true,
            });
        }
    }
    let path = format!("{:?}", plan_backward(norm, m, n, T::DTYPE, ws, cus).path);
    for b in bwds {
        let strat = match b.strategy {
            BwdStrategy::TwoStage => "two_stage",
            _ => "atomic",
        };
        let op = if b.dresidual {
            "rms_norm_bwd+dresidual"
        } else if layer {
            "layer_norm_bwd"
        } else {
            "rms_norm_bwd"
        };
        let case = format!(
            "{}_bwd_{strat}{}",
            g.tag,
            if b.dresidual { "_dres" } else { "" }
        );
        let name = format!(
            "{op} {}/{} {m}x{n} {strat}",
            T::DTYPE.name(),
            W::DTYPE.name()
        );
        let mut inputs = vec!["x", "gamma", "dy"];
        if layer {
            inputs.push("beta");
        }
        if b.dresidual {
            inputs.extend(["residual", "dresidual"]);
        }
        let head = case_head(
            &g,
            &name,
            op,
            "bwd",
            &path,
            layer,
            b.dresidual,
            "none",
            false,
            Some(b.strategy),
            b.dresidual,
        );
        let result = run_bwd(s, w, &g, b, &case);
        finish(w, c, head, inputs_json(&g, &inputs), result);
    }
    Ok(())
}

/// Close a case's manifest entry with its inputs and outputs, or its error.
fn finish(
    w: &mut Writer,
    c: &mut Counts,
    mut head: Value,
    inputs: Value,
    r: Result<Vec<(&'static str, Value)>>,
) {
    c.cases += 1;
    head["inputs"] = inputs;
    match r {
        Ok(outs) => {
            let outs: Map<String, Value> =
                outs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            head["outputs"] = Value::Object(outs);
            head["error"] = Value::Null;
        }
        Err(e) => {
            w.errors += 1;
            println!("torch_check: {}: failed: {e}", head["name"]);
            head["outputs"] = json!({});
            head["error"] = json!(e.to_string());
        }
    }
    w.cases.push(head);
}

fn skip(why: String) {
    if flydsl_testutil::gpu::required() {
        let var = flydsl_testutil::gpu::REQUIRE_GPU_VAR;
        eprintln!("torch_check: {var} is set, but the check cannot run: {why}");
        std::process::exit(1);
    }
    println!("torch_check: skipped: {why}");
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("torch_check: {e}");
            std::process::exit(2);
        }
    };
    let dev = match Device::best() {
        Ok(d) => d,
        Err(e) => return skip(format!("no usable device: {e}")),
    };
    if dev.backend() == Backend::Sim && !opts.sim {
        return skip(format!(
            "the best device is the Sim ({}): there is no GPU to check (--sim runs anyway)",
            dev.target()
        ));
    }
    let target = dev.target();
    if let Some(k) = fly_norm::kernels::ALL_KERNELS.iter().find(|k| {
        dev.backend() != Backend::Sim && k.for_target(target).and_then(|v| v.code).is_none()
    }) {
        return skip(format!(
            "kernel {} has no {target} code object; build with the target's feature \
             (e.g. --features sm90)",
            k.name
        ));
    }
    match check(&dev, &opts) {
        Ok(0) => {}
        Ok(errors) => {
            eprintln!("torch_check: {errors} cases failed to run (see the manifest)");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("torch_check: {e}");
            std::process::exit(1);
        }
    }
}

/// Run every case into `opts.out`; returns the number of cases whose call failed.
fn check(dev: &Device, opts: &Opts) -> Result<usize> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&opts.out)?;
    let s = dev.stream()?;
    let mut w = Writer {
        dir: opts.out.clone(),
        cases: Vec::new(),
        bytes: 0,
        errors: 0,
    };
    let mut c = Counts::default();
    let shapes: &[(usize, usize)] = if opts.quick { &QUICK_SHAPES } else { &SHAPES };
    for &sh in shapes {
        group::<f32, f32>(&s, &mut w, &mut c, Norm::Layer, sh)?;
        group::<f16, f16>(&s, &mut w, &mut c, Norm::Layer, sh)?;
        group::<bf16, bf16>(&s, &mut w, &mut c, Norm::Layer, sh)?;
        group::<f32, f32>(&s, &mut w, &mut c, Norm::Rms, sh)?;
        group::<f16, f16>(&s, &mut w, &mut c, Norm::Rms, sh)?;
        group::<bf16, bf16>(&s, &mut w, &mut c, Norm::Rms, sh)?;
        group::<f16, f32>(&s, &mut w, &mut c, Norm::Rms, sh)?;
        group::<bf16, f32>(&s, &mut w, &mut c, Norm::Rms, sh)?;
    }
    let manifest = json!({
        "version": 1,
        "device": dev.name(),
        "backend": dev.backend().to_string(),
        "target": dev.target().to_string(),
        "wave_size": dev.wave_size(),
        "cases": std::mem::take(&mut w.cases),
    });
    std::fs::write(
        opts.out.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    println!(
        "torch_check: {} cases in {} groups on {} ({}, {}): {:.1} MB in {} in {:.1} s; \
         {} failed to run",
        c.cases,
        c.groups,
        dev.name(),
        dev.backend(),
        dev.target(),
        w.bytes as f64 / 1e6,
        opts.out.display(),
        t0.elapsed().as_secs_f64(),
        w.errors
    );
    Ok(w.errors)
}
