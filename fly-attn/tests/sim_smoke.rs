mod common;
use common::check;
use flydsl_rt::{half::bf16, half::f16, Device, Target};
use flydsl_testutil::attn::AttnShape;

#[test]
fn smoke() {
    for t in Target::ALL {
        let dev = Device::sim(t);
        let t0 = std::time::Instant::now();
        check::<bf16>(
            &dev,
            &AttnShape::dense(1, 17, 33, 2, 1, 64, false),
            Some(1),
            1,
        );
        check::<f16>(
            &dev,
            &AttnShape::dense(2, 65, 40, 2, 2, 96, true),
            Some(1),
            2,
        );
        check::<bf16>(
            &dev,
            &AttnShape::dense(1, 33, 129, 4, 1, 32, true),
            Some(3),
            3,
        );
        check::<f16>(
            &dev,
            &AttnShape::varlen(&[5, 0, 70], &[3, 4, 0], 2, 1, 256, false),
            Some(2),
            4,
        );
        println!("{t}: {:?}", t0.elapsed());
    }
}
