//! Catalogue caching honours `ttlMs`: without it a list is stale at once and refetched on the next
//! need; with it the list is reused until it expires. A call resolves against the cached list.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Map;
use warden_mcp::{CallOptions, ServerSpec, ToolIdentity};

use crate::common;

/// A server that counts `tools/list` requests and answers with an optional `ttlMs`.
#[derive(Clone)]
struct CountingServer {
    lists: Arc<AtomicUsize>,
    ttl_ms: Option<u64>,
}

impl ServerHandler for CountingServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        let schema = serde_json::json!({"type": "object", "properties": {}});
        let schema = Arc::new(schema.as_object().cloned().expect("object"));
        let mut result =
            ListToolsResult::with_all_items(vec![Tool::new("ping", "Answers pong.", schema)]);
        result.ttl_ms = self.ttl_ms;
        Ok(result)
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text("pong")]).into())
    }
}

async fn counting_server(ttl_ms: Option<u64>) -> (String, Arc<AtomicUsize>) {
    let lists = Arc::new(AtomicUsize::new(0));
    let server = CountingServer {
        lists: lists.clone(),
        ttl_ms,
    };
    let port = warden_testkit::free_port();
    let address: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    tokio::spawn(warden_testkit::fixtures::serve(
        move || server.clone(),
        Some(address),
    ));
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(address).await.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    (format!("http://{address}/mcp"), lists)
}

#[tokio::test]
async fn without_ttl_every_need_refetches_but_a_call_uses_the_cached_list() {
    let (url, lists) = counting_server(None).await;
    let test = common::runtime(vec![ServerSpec::http("count", &url)]);
    let runtime = &test.runtime;
    runtime.server_tools("count").await.expect("tools");
    runtime.server_tools("count").await.expect("tools again");
    assert_eq!(lists.load(Ordering::SeqCst), 2);
    runtime
        .call_tool(
            &ToolIdentity::new("count", "ping"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect("ping");
    assert_eq!(
        lists.load(Ordering::SeqCst),
        2,
        "a call must not refetch the list"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn with_ttl_the_list_is_reused_until_it_expires() {
    let (url, lists) = counting_server(Some(600_000)).await;
    let test = common::runtime(vec![ServerSpec::http("count", &url)]);
    let runtime = &test.runtime;
    for _ in 0..3 {
        runtime.server_tools("count").await.expect("tools");
    }
    assert_eq!(lists.load(Ordering::SeqCst), 1);
    runtime.shutdown().await;
}
