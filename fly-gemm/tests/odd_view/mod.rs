//! A C buffer one element into another allocation (aligned to one element, not two), for
//! the tests of what the Hopper kernels' column-pair stores refuse.

use flydsl_rt::half::bf16;
use flydsl_rt::{Device, DeviceBuffer, Stream};

/// The value every element of the owner starts as.
pub const SENTINEL: f32 = -7.0;

/// `(owner, view)`: an owner of `len + 1` [`SENTINEL`] values and a view of its elements
/// `1..=len`. Keep the owner alive while the view is used, and read it only between uses.
pub fn odd_view(dev: &Device, s: &Stream, len: usize) -> (DeviceBuffer<bf16>, DeviceBuffer<bf16>) {
    let owner = DeviceBuffer::from_slice(dev, &vec![bf16::from_f32(SENTINEL); len + 1]).unwrap();
    let at = owner.as_device_ptr() + 2;
    // SAFETY: elements 1..=len of `owner`, returned with the view for the caller to keep
    // alive; the tests write the view only through the calls under test.
    let view = unsafe { DeviceBuffer::<bf16>::from_raw_parts(s, at, len) }.unwrap();
    (owner, view)
}

/// Assert the owner is untouched (all [`SENTINEL`]) after a refused call.
pub fn assert_untouched(owner: &DeviceBuffer<bf16>) {
    let got = owner.to_vec().unwrap();
    assert!(got.iter().all(|x| x.to_f32() == SENTINEL), "{got:?}");
}

/// Assert the element before the view is untouched and every element of the view is `want`.
pub fn assert_view_is(owner: &DeviceBuffer<bf16>, want: f32, ctx: &str) {
    let got = owner.to_vec().unwrap();
    assert_eq!(
        got[0].to_f32(),
        SENTINEL,
        "{ctx}: the element before the view"
    );
    assert!(
        got[1..].iter().all(|x| x.to_f32() == want),
        "{ctx}: {got:?}"
    );
}
