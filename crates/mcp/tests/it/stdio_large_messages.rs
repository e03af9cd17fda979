//! Large results from a real stdio server arrive byte-exact through warden's own stdio transport.

use warden_testkit::fixtures::big_text;

use crate::common::{self, big_result, only_text};

#[tokio::test]
async fn large_results_arrive_byte_exact_and_small_ones_still_flow_after_them() {
    let test = common::runtime(vec![common::fixture("big", "big-result")]);
    for bytes in [1024 * 1024 - 200, 1024 * 1024 + 1, 3 * 1024 * 1024 + 7] {
        let result = big_result(&test.runtime, Some(bytes)).await;
        assert!(
            only_text(&result) == big_text(bytes),
            "{bytes} bytes differ"
        );
        assert_eq!(result.is_error, Some(false));
    }
    let small = big_result(&test.runtime, Some(100)).await;
    assert_eq!(only_text(&small), big_text(100));
    test.runtime.shutdown().await;
}
