//! Stream capture into graphs ([`Stream::begin_capture`], [`Stream::end_capture`],
//! [`Graph::launch`]): CUDA graphs; the Sim (whose launches run at once) and HIP (not
//! implemented yet) refuse with an error that says so.

use crate::backend::RawStream;
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::types::StreamId;

fn refused(op: &str, backend: &str) -> Error {
    Error::InvalidArgument {
        op: op.to_string(),
        reason: format!(
            "stream capture is not available on {backend}: {}",
            if backend == "the Sim" {
                "its launches run when they are issued; call the work directly"
            } else {
                "not implemented in flydsl-rt yet; use CUDA"
            }
        ),
    }
}

/// An instantiated graph captured from a stream; [`launch`](Self::launch) replays it.
///
/// Work captured must not allocate, free or wait on the host: launch it once eagerly first
/// (which loads its code objects and moves its buffers to the stream), then capture.
#[derive(Debug)]
pub struct Graph {
    stream: StreamId,
    #[cfg(feature = "cuda")]
    raw: crate::backend::cuda_peer::CudaGraph,
}

impl Stream {
    /// Start capturing this stream's work (CUDA relaxed capture mode).
    ///
    /// ```
    /// use flydsl_rt::{Device, Target};
    /// let s = Device::sim(Target::Sm90).stream().unwrap();
    /// assert!(s.begin_capture().is_err()); // the Sim runs work at once
    /// ```
    pub fn begin_capture(&self) -> Result<()> {
        const OP: &str = "Stream::begin_capture";
        match &*self.raw {
            RawStream::Sim => Err(refused(OP, "the Sim")),
            RawStream::Hip(_) => Err(refused(OP, "HIP")),
            #[cfg(feature = "cuda")]
            RawStream::Cuda(s) => s.begin_capture(),
            #[cfg(not(feature = "cuda"))]
            RawStream::Cuda(s) => match *s {},
        }
    }

    /// End the capture [`begin_capture`](Self::begin_capture) started and instantiate it.
    pub fn end_capture(&self) -> Result<Graph> {
        const OP: &str = "Stream::end_capture";
        match &*self.raw {
            RawStream::Sim => Err(refused(OP, "the Sim")),
            RawStream::Hip(_) => Err(refused(OP, "HIP")),
            #[cfg(feature = "cuda")]
            RawStream::Cuda(s) => Ok(Graph {
                stream: self.id,
                raw: s.end_capture()?,
            }),
            #[cfg(not(feature = "cuda"))]
            RawStream::Cuda(s) => match *s {},
        }
    }
}

impl Graph {
    /// The stream it was captured from.
    pub fn captured_from(&self) -> StreamId {
        self.stream
    }

    /// Enqueue one replay on `stream` (a stream of the captured stream's device).
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        match &*stream.raw {
            #[cfg(feature = "cuda")]
            RawStream::Cuda(s) => self.raw.launch(s),
            _ => Err(refused("Graph::launch", "this stream's backend")),
        }
    }
}
