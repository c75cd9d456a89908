//! The IP header code of the bottleneck (flow hash, ECN field, CE marking) never panics on any
//! bytes; marking only ever touches the ECN bits (and the IPv4 header checksum, which stays
//! valid when it was), and a packet it marks reads CE afterwards.
use socklab_impair::ip::{ecn, flow_hash, ipv4_header_checksum_ok, set_ce, CE, ECT0, ECT1};

/// One input of the target.
pub fn run(data: &[u8]) {
    let _ = flow_hash(data, 1);
    let before = ecn(data);
    let valid = ipv4_header_checksum_ok(data);
    let mut p = data.to_vec();
    let marked = set_ce(&mut p);
    assert_eq!(marked, matches!(before, Some(ECT0 | ECT1 | CE)));
    if marked {
        assert_eq!(ecn(&p), Some(CE));
        if valid == Some(true) {
            assert_eq!(ipv4_header_checksum_ok(&p), Some(true));
        }
        for (i, (a, b)) in data.iter().zip(&p).enumerate() {
            if a != b {
                assert!(i == 1 || i == 10 || i == 11, "byte {i} changed");
            }
        }
    } else {
        assert_eq!(p, data);
    }
    // The flow does not depend on the ECN field.
    assert_eq!(flow_hash(&p, 1), flow_hash(data, 1));
}
