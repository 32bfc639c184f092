//! The per-rank collectives: checks (before anything is enqueued), the copy into the staging
//! area, the launch.

use crate::config::Kind;
use crate::error::{arg, CommError, Result};
use crate::launch::{launch, Fused};
use crate::rank::CustomAllReduce;
use crate::select::Algorithm;
use flydsl_rt::{DeviceBuffer, Element, Stream};

impl CustomAllReduce {
    /// The checks every collective of this rank runs: the stream and buffers are on this
    /// rank's device, and the message fits the registered size.
    fn check_call<T: Element>(
        &self,
        function: &'static str,
        stream: &Stream,
        bufs: &[(&'static str, &DeviceBuffer<T>)],
        n: usize,
    ) -> Result<u64> {
        if stream.device() != &self.device {
            return Err(arg(
                function,
                "stream",
                stream.device().label(),
                format!("rank {} lives on {}", self.rank, self.device.label()),
                "pass a stream of the rank's device",
            ));
        }
        for (name, b) in bufs {
            if b.device() != &self.device {
                return Err(arg(
                    function,
                    name,
                    b.device().label(),
                    format!("rank {} lives on {}", self.rank, self.device.label()),
                    "pass buffers of the rank's device",
                ));
            }
            if b.len() != n {
                return Err(arg(
                    function,
                    name,
                    format!("{} elements", b.len()),
                    format!("must have the input's {n} elements"),
                    "pass buffers of equal length",
                ));
            }
        }
        let bytes = n as u64 * u64::from(T::DTYPE.bytes());
        if bytes > self.layout.max_bytes {
            return Err(CommError::TooLarge {
                function,
                bytes,
                max: self.layout.max_bytes,
            });
        }
        Ok(bytes)
    }

    /// Sum `input` over every rank of the group into `output` (out of place), choosing the
    /// algorithm by size ([`algorithm_for`](Self::algorithm_for)); returns it. Every rank
    /// must make the same call (same length and dtype) on its own stream; the call returns
    /// once enqueued (the Sim runs it at once, so on the Sim each rank needs its own thread).
    /// `input` is copied into the registered staging area first
    /// ([`all_reduce_registered`](Self::all_reduce_registered) skips the copy). The result
    /// is the f32 sum in rank order, rounded once: bit-identical on every rank, for both
    /// algorithms. Graph-capturable: no allocation, no host wait.
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, Target};
    /// let devs = [Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90)];
    /// let ranks = fly_comm::CustomAllReduce::new_group(&devs, &fly_comm::Config::default()).unwrap();
    /// let outs: Vec<Vec<f32>> = std::thread::scope(|s| {
    ///     let hs: Vec<_> = ranks.iter().map(|r| s.spawn(move || {
    ///         let st = r.device().stream().unwrap();
    ///         let x = DeviceBuffer::from_slice(r.device(), &[r.rank() as f32 + 1.0; 8]).unwrap();
    ///         let mut y = DeviceBuffer::<f32>::zeroed(r.device(), 8).unwrap();
    ///         r.all_reduce(&st, &x, &mut y).unwrap();
    ///         y.to_vec().unwrap()
    ///     })).collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).collect()
    /// });
    /// assert_eq!(outs, vec![vec![3.0f32; 8]; 2]);
    /// ```
    pub fn all_reduce<T: Element>(
        &self,
        stream: &Stream,
        input: &DeviceBuffer<T>,
        output: &mut DeviceBuffer<T>,
    ) -> Result<Algorithm> {
        const F: &str = "fly_comm::CustomAllReduce::all_reduce";
        let n = input.len();
        let bytes = self.check_call(F, stream, &[("input", input), ("output", output)], n)?;
        self.run(stream, Some(input), output, self.algorithm_for(bytes))
    }

    /// [`all_reduce`](Self::all_reduce) with the algorithm pinned (the bench times both).
    pub fn all_reduce_with<T: Element>(
        &self,
        stream: &Stream,
        input: &DeviceBuffer<T>,
        output: &mut DeviceBuffer<T>,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        const F: &str = "fly_comm::CustomAllReduce::all_reduce_with";
        let n = input.len();
        self.check_call(F, stream, &[("input", input), ("output", output)], n)?;
        if algorithm == Algorithm::TwoStage && n / (T::DTYPE.vec() as usize) < self.world {
            return Err(arg(
                F,
                "algorithm",
                "TwoStage",
                format!(
                    "needs at least one 16-byte pack per rank ({} ranks)",
                    self.world
                ),
                "use Algorithm::OneStage for this size",
            ));
        }
        self.run(stream, Some(input), output, algorithm)
    }

    /// In-place [`all_reduce`](Self::all_reduce): `buf` is the input and the output.
    pub fn all_reduce_in_place<T: Element>(
        &self,
        stream: &Stream,
        buf: &mut DeviceBuffer<T>,
    ) -> Result<Algorithm> {
        const F: &str = "fly_comm::CustomAllReduce::all_reduce_in_place";
        let n = buf.len();
        let bytes = self.check_call(F, stream, &[("buf", buf)], n)?;
        let mut staging = self.registered_input::<T>(stream, n)?;
        if n > 0 {
            stream.copy_device(buf, &mut staging)?;
        }
        self.run(stream, None, buf, self.algorithm_for(bytes))
    }

    /// [`all_reduce`](Self::all_reduce) of data already in this rank's staging area: `input`
    /// must be a view from [`registered_input`](Self::registered_input) (no copy), else
    /// [`CommError::NotRegistered`].
    pub fn all_reduce_registered<T: Element>(
        &self,
        stream: &Stream,
        input: &DeviceBuffer<T>,
        output: &mut DeviceBuffer<T>,
    ) -> Result<Algorithm> {
        const F: &str = "fly_comm::CustomAllReduce::all_reduce_registered";
        let n = input.len();
        let bytes = self.check_call(F, stream, &[("input", input), ("output", output)], n)?;
        if n > 0 && input.as_device_ptr() != self.own.device_ptr() + self.layout.staging {
            return Err(CommError::NotRegistered {
                function: F,
                ptr: input.as_device_ptr(),
            });
        }
        self.run(stream, None, output, self.algorithm_for(bytes))
    }

    /// Copy `input` (if any) into the staging area, then launch `algorithm`.
    fn run<T: Element>(
        &self,
        stream: &Stream,
        input: Option<&DeviceBuffer<T>>,
        output: &mut DeviceBuffer<T>,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let n = output.len();
        if n == 0 {
            return Ok(algorithm);
        }
        if let Some(input) = input {
            let mut staging = self.registered_input::<T>(stream, n)?;
            stream.copy_device(input, &mut staging)?;
        }
        let kind = match algorithm {
            Algorithm::OneStage => Kind::OneStage,
            Algorithm::TwoStage => Kind::TwoStage,
        };
        launch(self, stream, kind, n, output, None)?;
        Ok(algorithm)
    }

    /// Fused all-reduce + residual add + RMSNorm of `[m, n]` rows (fly-norm's
    /// `rms_norm_add` semantics on the all-reduced input): `x = sum over ranks of input`
    /// (rounded to `T`), `residual_out = x + residual` (rounded), `out = residual_out *
    /// rsqrt(mean(residual_out^2) + eps) * weight`, in one kernel. `n` must be a multiple of
    /// the 16-byte vector (4 for f32, 8 for f16/bf16); `weight` has `n` elements.
    #[allow(clippy::too_many_arguments)]
    pub fn fused_all_reduce_rms_norm<T: Element>(
        &self,
        stream: &Stream,
        input: &DeviceBuffer<T>,
        residual: &DeviceBuffer<T>,
        weight: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
        residual_out: &mut DeviceBuffer<T>,
        (m, n): (usize, usize),
        eps: f32,
    ) -> Result<()> {
        const F: &str = "fly_comm::CustomAllReduce::fused_all_reduce_rms_norm";
        let vec = T::DTYPE.vec() as usize;
        if n == 0 || n % vec != 0 || n > i32::MAX as usize || m > i32::MAX as usize {
            return Err(arg(
                F,
                "n",
                n,
                format!("must be a positive multiple of {vec} (one 16-byte vector) below 2^31"),
                "pad the rows, or call all_reduce and fly_norm::rms_norm_add",
            ));
        }
        let total = m
            .checked_mul(n)
            .ok_or_else(|| arg(F, "m", m, "m * n overflows", "pass a smaller shape"))?;
        self.check_call(
            F,
            stream,
            &[
                ("input", input),
                ("residual", residual),
                ("out", out),
                ("residual_out", residual_out),
            ],
            total,
        )?;
        self.check_call(F, stream, &[("weight", weight)], n)?;
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(arg(
                F,
                "eps",
                eps,
                "must be finite and >= 0",
                "pass e.g. 1e-6",
            ));
        }
        if m == 0 {
            return Ok(());
        }
        let mut staging = self.registered_input::<T>(stream, total)?;
        stream.copy_device(input, &mut staging)?;
        let fused = Fused {
            residual,
            weight,
            residual_out,
            m,
            cols: n,
            eps,
        };
        launch(self, stream, Kind::FusedRmsNorm, total, out, Some(fused))
    }
}
