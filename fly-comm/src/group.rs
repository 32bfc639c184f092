//! [`AllReduceGroup`]: every rank of a group in one process, with the cross-rank checks
//! (lengths, devices, world size) done before any rank launches.

use crate::error::{arg, CommError, Result};
use crate::rank::{Config, CustomAllReduce};
use crate::select::Algorithm;
use flydsl_rt::{Backend, Device, DeviceBuffer, Element, Stream};

/// The ranks of a custom all-reduce driven by one process (one per device).
#[derive(Debug)]
pub struct AllReduceGroup {
    ranks: Vec<CustomAllReduce>,
}

impl AllReduceGroup {
    /// One rank per entry of `devices` ([`CustomAllReduce::new_group`]).
    pub fn new(devices: &[Device], cfg: &Config) -> Result<AllReduceGroup> {
        Ok(AllReduceGroup {
            ranks: CustomAllReduce::new_group(devices, cfg)?,
        })
    }

    /// The ranks.
    pub fn ranks(&self) -> &[CustomAllReduce] {
        &self.ranks
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.ranks.len()
    }

    /// Check one group call: one stream, input and output per rank, each on its rank's
    /// device, all of the same length.
    fn check<T: Element>(
        &self,
        function: &'static str,
        streams: &[Stream],
        inputs: &[&DeviceBuffer<T>],
        outputs: &[&mut DeviceBuffer<T>],
    ) -> Result<()> {
        let ws = self.world_size();
        for got in [streams.len(), inputs.len(), outputs.len()] {
            if got != ws {
                return Err(CommError::WorldSize {
                    function,
                    got,
                    built: ws,
                });
            }
        }
        let n = inputs[0].len();
        for (r, rank) in self.ranks.iter().enumerate() {
            for (what, dev) in [
                ("streams", streams[r].device()),
                ("inputs", inputs[r].device()),
                ("outputs", outputs[r].device()),
            ] {
                if dev != rank.device() {
                    return Err(arg(
                        function,
                        what,
                        format!("[{r}] on {}", dev.label()),
                        format!("rank {r} lives on {}", rank.device().label()),
                        "pass each rank's stream and buffers on its own device, in rank order",
                    ));
                }
            }
            for (what, len) in [
                ("inputs.len()", inputs[r].len()),
                ("outputs.len()", outputs[r].len()),
            ] {
                if len != n {
                    return Err(CommError::RankMismatch {
                        function,
                        argument: what,
                        rank: r,
                        value: len.to_string(),
                        expected: n.to_string(),
                    });
                }
            }
        }
        let bytes = n as u64 * u64::from(T::DTYPE.bytes());
        if bytes > self.ranks[0].max_bytes() {
            return Err(CommError::TooLarge {
                function,
                bytes,
                max: self.ranks[0].max_bytes(),
            });
        }
        Ok(())
    }

    /// [`CustomAllReduce::all_reduce`] on every rank: `streams[r]`, `inputs[r]`, `outputs[r]`
    /// belong to rank `r`. All checks run before any rank launches. On GPUs the ranks are
    /// enqueued one after another from this thread; on the Sim (synchronous launches) each
    /// rank runs on its own scoped thread.
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, Target};
    /// let devs: Vec<_> = (0..4).map(|_| Device::new_sim(Target::Gfx942)).collect();
    /// let g = fly_comm::AllReduceGroup::new(&devs, &fly_comm::Config::default()).unwrap();
    /// let streams: Vec<_> = devs.iter().map(|d| d.stream().unwrap()).collect();
    /// let xs: Vec<_> = devs.iter().map(|d| DeviceBuffer::from_slice(d, &[1.0f32; 12]).unwrap()).collect();
    /// let mut ys: Vec<_> = devs.iter().map(|d| DeviceBuffer::<f32>::zeroed(d, 12).unwrap()).collect();
    /// g.all_reduce(&streams, &xs.iter().collect::<Vec<_>>(), &mut ys.iter_mut().collect::<Vec<_>>()).unwrap();
    /// assert_eq!(ys[3].to_vec().unwrap(), vec![4.0; 12]);
    /// ```
    pub fn all_reduce<T: Element>(
        &self,
        streams: &[Stream],
        inputs: &[&DeviceBuffer<T>],
        outputs: &mut [&mut DeviceBuffer<T>],
    ) -> Result<Algorithm> {
        const F: &str = "fly_comm::AllReduceGroup::all_reduce";
        self.check(F, streams, inputs, outputs)?;
        let jobs: Vec<_> = outputs.iter_mut().collect();
        let res = self.each(jobs, |r, out| {
            r.all_reduce(&streams[r.rank()], inputs[r.rank()], out)
        });
        res.into_iter().next().unwrap_or(Ok(Algorithm::OneStage))
    }

    /// [`CustomAllReduce::check`] on every rank (the first error).
    pub fn check_status(&self, streams: &[Stream]) -> Result<()> {
        for (r, s) in self.ranks.iter().zip(streams) {
            r.check(s)?;
        }
        Ok(())
    }

    /// Run `f` for every rank with its job: on the Sim each on its own thread; else in order.
    /// Returns the results in rank order, the first error first.
    pub(crate) fn each<J: Send, R: Send>(
        &self,
        jobs: Vec<J>,
        f: impl Fn(&CustomAllReduce, J) -> Result<R> + Sync,
    ) -> Vec<Result<R>> {
        let mut res: Vec<Result<R>> = if self.ranks[0].device().backend() == Backend::Sim {
            std::thread::scope(|s| {
                let hs: Vec<_> = self
                    .ranks
                    .iter()
                    .zip(jobs)
                    .map(|(r, j)| {
                        let f = &f;
                        s.spawn(move || f(r, j))
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(CommError::Vendor {
                                library: "fly-comm",
                                reason: "a rank's thread panicked".into(),
                            })
                        })
                    })
                    .collect()
            })
        } else {
            self.ranks.iter().zip(jobs).map(|(r, j)| f(r, j)).collect()
        };
        // The first error (by rank) first, so callers can return it.
        if let Some(i) = res.iter().position(|r| r.is_err()) {
            res.swap(0, i);
        }
        res
    }
}
