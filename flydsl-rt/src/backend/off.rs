//! A backend left out by its cargo feature: uninhabited handle types with the interface the
//! dispatch in `backend/mod.rs` calls, so that no match there needs a `cfg`. Enumeration
//! reports the missing feature; nothing else can be reached (no value of these types exists).

/// Define the left-out backend module `$m` for `$backend` (cargo feature `$feature`).
macro_rules! off_backend {
    ($m:ident, $backend:expr, $feature:literal, $Dev:ident, $Stream:ident, $Event:ident, $Func:ident) => {
        pub(crate) mod $m {
            use crate::error::{Error, Result};
            use crate::launch::config::LaunchConfig;
            use crate::launch::decode::Decoded;
            use crate::types::DeviceInfo;
            use crate::variant::KernelResources;
            use std::ffi::c_void;

            #[derive(Debug)]
            pub(crate) enum $Dev {}
            #[derive(Debug)]
            pub(crate) enum $Stream {}
            #[derive(Debug)]
            pub(crate) enum $Event {}
            #[derive(Debug)]
            pub(crate) enum $Func {}

            /// The library search of a left-out backend: nothing to load.
            #[allow(dead_code)]
            pub(crate) mod sys {
                pub(crate) fn candidates() -> Vec<String> {
                    Vec::new()
                }
            }

            /// No device of a left-out backend exists, so no tensor map of one is encoded.
            #[allow(dead_code)]
            pub(crate) fn encode_tensor_map(
                _base: u64,
                _elem_bytes: u32,
                _dims: &[u64],
                _byte_strides: &[u64],
                _boxes: &[u32],
                _swizzle128: bool,
            ) -> Result<[u8; 128]> {
                enumerate().map(|_| [0; 128])
            }

            /// The backend is not built in.
            pub(crate) fn enumerate() -> Result<Vec<Result<($Dev, DeviceInfo)>>> {
                Err(Error::BackendUnavailable {
                    backend: $backend,
                    reason: concat!(
                        "flydsl-rt was built without its `",
                        $feature,
                        "` cargo feature; enable it"
                    )
                    .into(),
                })
            }

            #[allow(clippy::missing_safety_doc, unused_variables, dead_code)]
            impl $Dev {
                pub(crate) fn alloc(&self, bytes: u64, on: Option<&$Stream>) -> Result<u64> {
                    match *self {}
                }
                pub(crate) unsafe fn free(&self, ptr: u64, owner: Option<&$Stream>) -> Result<()> {
                    match *self {}
                }
                pub(crate) fn order(
                    &self,
                    from: Option<&$Stream>,
                    to: Option<&$Stream>,
                ) -> Result<()> {
                    match *self {}
                }
                pub(crate) unsafe fn htod(&self, dst: u64, src: &[u8]) -> Result<()> {
                    match *self {}
                }
                pub(crate) unsafe fn dtoh(&self, src: u64, dst: &mut [u8]) -> Result<()> {
                    match *self {}
                }
                pub(crate) unsafe fn memset_zero(&self, dst: u64, bytes: u64) -> Result<()> {
                    match *self {}
                }
                pub(crate) unsafe fn htod_async(
                    &self,
                    dst: u64,
                    src: *const u8,
                    bytes: usize,
                    s: &$Stream,
                ) -> Result<()> {
                    match *self {}
                }
                pub(crate) unsafe fn dtoh_async(
                    &self,
                    dst: *mut u8,
                    src: u64,
                    bytes: usize,
                    s: &$Stream,
                ) -> Result<()> {
                    match *self {}
                }
                pub(crate) unsafe fn dtod_async(
                    &self,
                    dst: u64,
                    src: u64,
                    bytes: usize,
                    s: &$Stream,
                ) -> Result<()> {
                    match *self {}
                }
                pub(crate) fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
                    match *self {}
                }
                pub(crate) unsafe fn host_free(&self, ptr: *mut u8) -> Result<()> {
                    match *self {}
                }
                pub(crate) fn pointer_info(&self, ptr: u64) -> Result<(i32, u64, u64)> {
                    match *self {}
                }
                pub(crate) unsafe fn borrowed_stream(&self, raw: *mut c_void) -> Result<$Stream> {
                    match *self {}
                }
                pub(crate) fn synchronize(&self) -> Result<()> {
                    match *self {}
                }
                pub(crate) fn stream(&self) -> Result<$Stream> {
                    match *self {}
                }
                pub(crate) fn event(&self) -> Result<$Event> {
                    match *self {}
                }
                pub(crate) fn load(&self, code: &[u8], decoded: &Decoded) -> Result<$Func> {
                    match *self {}
                }
                pub(crate) unsafe fn launch(
                    &self,
                    s: &$Stream,
                    f: &$Func,
                    d: &Decoded,
                    cfg: &LaunchConfig,
                    args: &[u8],
                ) -> Result<()> {
                    match *self {}
                }
            }

            #[allow(dead_code)]
            impl $Stream {
                pub(crate) fn synchronize(&self) -> Result<()> {
                    match *self {}
                }
            }

            #[allow(unused_variables, dead_code)]
            impl $Event {
                pub(crate) fn record(&self, s: &$Stream) -> Result<()> {
                    match *self {}
                }
                pub(crate) fn synchronize(&self) -> Result<()> {
                    match *self {}
                }
                pub(crate) fn elapsed_ms(&self, end: &$Event) -> Result<f32> {
                    match *self {}
                }
            }

            #[allow(dead_code)]
            impl $Func {
                pub(crate) fn resources(&self) -> Result<KernelResources> {
                    match *self {}
                }
            }
        }
    };
}
