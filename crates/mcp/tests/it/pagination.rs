//! Cursors are followed to the end, and a server whose pages never end stops at the 64-page limit
//! with a warning.

use warden_mcp::PAGE_LIMIT;
use warden_testkit::fixtures::{PAGE_SIZE, TOTAL_TOOLS};

use crate::common;

#[tokio::test]
async fn every_page_is_followed() {
    let test = common::runtime(vec![common::fixture("pages", "paginated")]);
    let tools = test.runtime.server_tools("pages").await.expect("tools");
    assert_eq!(tools.len(), TOTAL_TOOLS);
    let status = test.runtime.server_status("pages").expect("status");
    assert!(status.warnings.is_empty(), "{:?}", status.warnings);
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn endless_pages_stop_at_the_limit_and_say_so() {
    let test = common::runtime(vec![common::fixture("forever", "paginated-forever")]);
    let tools = test.runtime.server_tools("forever").await.expect("tools");
    assert_eq!(tools.len(), PAGE_LIMIT * PAGE_SIZE);
    let status = test.runtime.server_status("forever").expect("status");
    assert!(
        status
            .warnings
            .iter()
            .any(|warning| warning.contains("stopped after 64 pages")),
        "{:?}",
        status.warnings
    );
    let set = test.runtime.tools().await;
    assert!(
        set.warnings
            .iter()
            .any(|warning| warning.starts_with("MCP forever: tools/list stopped after 64 pages"))
    );
    test.runtime.shutdown().await;
}
