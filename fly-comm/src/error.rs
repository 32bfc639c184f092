//! [`CommError`]: every failure of fly-comm, each naming what is wrong and the fix.

use flydsl_rt::Target;

/// A fly-comm error. Argument errors name the public function, the argument, its value, the
/// rule and the fix, and are returned before anything is enqueued on any rank.
///
/// ```
/// let e = fly_comm::CommError::TooLarge {
///     function: "fly_comm::CustomAllReduce::all_reduce",
///     bytes: 1 << 30,
///     max: 1 << 20,
/// };
/// assert!(e.to_string().contains("registered size"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// An argument breaks a rule of the function.
    #[error("{function}: `{argument}` = {value}: {rule}; {fix}")]
    Argument {
        /// The public function called.
        function: &'static str,
        /// The argument.
        argument: &'static str,
        /// Its value.
        value: String,
        /// The rule it breaks.
        rule: String,
        /// How to fix it.
        fix: String,
    },
    /// Ranks of one collective call disagree (length, dtype, device, operation).
    #[error(
        "{function}: rank {rank} passed {argument} = {value}, rank 0 passed {expected}; every \
         rank of a collective must pass the same {argument}"
    )]
    RankMismatch {
        /// The public function called.
        function: &'static str,
        /// The argument that differs.
        argument: &'static str,
        /// The rank that differs from rank 0.
        rank: usize,
        /// Its value.
        value: String,
        /// Rank 0's value.
        expected: String,
    },
    /// A group call with another number of ranks than the group was built for.
    #[error(
        "{function}: {got} ranks' arguments were passed but the group was built for world size \
         {built}; pass one stream, input and output per rank"
    )]
    WorldSize {
        /// The public function called.
        function: &'static str,
        /// Ranks passed.
        got: usize,
        /// The group's world size.
        built: usize,
    },
    /// A message larger than the registered buffers.
    #[error(
        "{function}: the message has {bytes} bytes, over the registered size of {max} bytes; \
         build the group with a larger `Config::max_bytes` or use the vendor library \
         (`AllReduce` routes such messages there)"
    )]
    TooLarge {
        /// The public function called.
        function: &'static str,
        /// Bytes of the message.
        bytes: u64,
        /// The registered size.
        max: u64,
    },
    /// `all_reduce_registered` with an input that is not this rank's registered buffer.
    #[error(
        "{function}: `input` at {ptr:#x} is not this rank's registered buffer; write the data \
         into `registered_input()` first, or call `all_reduce`, which copies it there"
    )]
    NotRegistered {
        /// The public function called.
        function: &'static str,
        /// The input's device address.
        ptr: u64,
    },
    /// The custom all-reduce has no kernels for this target.
    #[error(
        "fly-comm: the custom all-reduce has no kernels for {target} (they exist for gfx942, \
         gfx950 and sm90; the reference is CDNA-only); use `AllReduce`, which takes the vendor \
         library there"
    )]
    UnsupportedTarget {
        /// The device's target.
        target: Target,
    },
    /// A kernel's wait for a peer timed out: a rank did not join a collective in time (it
    /// failed, or was never called). The rank is poisoned: its later calls do no work.
    #[error(
        "fly-comm: rank {rank}: {waits} wait(s) for a peer timed out after {timeout_ms} ms; a \
         peer did not join the collective (it failed or was not called); rebuild the group"
    )]
    Timeout {
        /// The rank that waited.
        rank: usize,
        /// Waits that timed out.
        waits: u32,
        /// The timeout of one wait.
        timeout_ms: u64,
    },
    /// A kernel found that a peer's call differs (length, dtype or algorithm) and did nothing.
    #[error(
        "fly-comm: rank {rank}: {count} peer call(s) had another length, dtype or algorithm \
         than this rank's; the collective did nothing: pass the same arguments on every rank"
    )]
    PeerMismatch {
        /// The rank that noticed.
        rank: usize,
        /// Mismatches counted.
        count: u32,
    },
    /// The vendor library (NCCL / RCCL) is unavailable or failed.
    #[error("fly-comm: {library}: {reason}")]
    Vendor {
        /// `NCCL` or `RCCL`.
        library: &'static str,
        /// What failed and how to fix it.
        reason: String,
    },
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] flydsl_rt::Error),
}

/// fly-comm's result type.
pub type Result<T> = std::result::Result<T, CommError>;

/// An [`CommError::Argument`].
pub(crate) fn arg(
    function: &'static str,
    argument: &'static str,
    value: impl std::fmt::Display,
    rule: impl Into<String>,
    fix: impl Into<String>,
) -> CommError {
    CommError::Argument {
        function,
        argument,
        value: value.to_string(),
        rule: rule.into(),
        fix: fix.into(),
    }
}
