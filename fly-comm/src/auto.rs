//! [`AllReduce`]: one API over the custom kernels and the vendor library, with the choice
//! visible to the caller ([`Path`]).

use crate::error::{CommError, Result};
use crate::rank::CustomAllReduce;
use crate::select::Algorithm;
use crate::vendor::VendorAllReduce;
use flydsl_rt::{DeviceBuffer, Element, Stream};

/// Which implementation ran a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// fly-comm's kernels, with the algorithm.
    Custom(Algorithm),
    /// The vendor library (NCCL on CUDA, RCCL on HIP).
    Vendor,
}

/// One rank's all-reduce: the custom kernels where they apply, the vendor library for the
/// rest (messages over the registered size, targets without kernels, world sizes other than
/// 2, 4, 8, more than one node: give it only a vendor communicator then).
#[derive(Debug)]
pub struct AllReduce {
    custom: Option<CustomAllReduce>,
    vendor: Option<VendorAllReduce>,
}

impl AllReduce {
    /// From the parts a rank has (at least one).
    ///
    /// ```
    /// use flydsl_rt::{Device, DeviceBuffer, Target};
    /// use fly_comm::{AllReduce, Algorithm, Config, CustomAllReduce, Path};
    /// let devs = [Device::new_sim(Target::Sm90), Device::new_sim(Target::Sm90)];
    /// let mut ranks = CustomAllReduce::new_group(&devs, &Config::default()).unwrap().into_iter();
    /// let ar = AllReduce::new(ranks.next(), None).unwrap();
    /// assert_eq!(ar.path_for(1 << 10), Some(Path::Custom(Algorithm::OneStage)));
    /// assert_eq!(ar.path_for(1 << 30), None); // too large, and no vendor library given
    /// ```
    pub fn new(
        custom: Option<CustomAllReduce>,
        vendor: Option<VendorAllReduce>,
    ) -> Result<AllReduce> {
        if custom.is_none() && vendor.is_none() {
            return Err(crate::error::arg(
                "fly_comm::AllReduce::new",
                "custom, vendor",
                "None, None",
                "at least one implementation is needed",
                "pass a CustomAllReduce or a VendorAllReduce",
            ));
        }
        Ok(AllReduce { custom, vendor })
    }

    /// The path a message of `bytes` takes (`None`: none can take it).
    pub fn path_for(&self, bytes: u64) -> Option<Path> {
        match (&self.custom, &self.vendor) {
            (Some(c), _) if bytes <= c.max_bytes() => Some(Path::Custom(c.algorithm_for(bytes))),
            (_, Some(_)) => Some(Path::Vendor),
            _ => None,
        }
    }

    /// Sum `input` over the ranks into `output`; returns the path taken.
    pub fn all_reduce<T: Element>(
        &self,
        stream: &Stream,
        input: &DeviceBuffer<T>,
        output: &mut DeviceBuffer<T>,
    ) -> Result<Path> {
        let bytes = input.len() as u64 * u64::from(T::DTYPE.bytes());
        match (self.path_for(bytes), &self.custom, &self.vendor) {
            (Some(Path::Custom(_)), Some(c), _) => {
                c.all_reduce(stream, input, output).map(Path::Custom)
            }
            (Some(Path::Vendor), _, Some(v)) => {
                v.all_reduce(stream, input, output).map(|()| Path::Vendor)
            }
            _ => Err(CommError::TooLarge {
                function: "fly_comm::AllReduce::all_reduce",
                bytes,
                max: self.custom.as_ref().map_or(0, |c| c.max_bytes()),
            }),
        }
    }
}
