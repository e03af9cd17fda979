//! Tools with invalid or duplicate names keep their raw identity; calls route by that identity.

use serde_json::Map;
use warden_mcp::{CallOptions, ToolIdentity};
use warden_testkit::fixtures::BAD_TOOL_NAMES;

use crate::common;

#[tokio::test]
async fn raw_names_are_kept_and_routed_exactly() {
    let test = common::runtime(vec![common::fixture("odd", "bad-names")]);
    let runtime = &test.runtime;
    let tools = runtime.server_tools("odd").await.expect("tools");
    for name in BAD_TOOL_NAMES {
        assert!(
            tools.iter().any(|tool| tool.identity.tool == *name),
            "missing {name:?}"
        );
    }
    for name in ["clash.name", "clash/name", "search files", "db.query/v2"] {
        let outcome = runtime
            .call_tool(
                &ToolIdentity::new("odd", name),
                Map::new(),
                CallOptions::default(),
            )
            .await
            .expect("call");
        assert_eq!(
            common::first_text(&outcome.result),
            format!("called {name}")
        );
    }
    runtime.shutdown().await;
}
