//! The service under test: `warden_service::serve` over `ConfigHost` and a SQLite store in a temporary folder, the mock model as the configured model, and the HTTP calls the tests make.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_config::Paths;
use warden_mock_model::MockModel;
use warden_service::{ConfigHost, Role, ServiceStorage, SqliteStorage};
use warden_session::ConfigOpener;
pub(crate) use warden_testkit::service_api::{client, read_stream, send};

/// The mock model as the default model, and profile `support` with the file tools (in the
/// session's own folder); `[agents.support]` is the last table, so `extra` may add its keys.
pub(crate) fn config(mock: &MockModel, extra: &str) -> String {
    format!(
        "schema_version = 1\nmodel = \"mock\"\n[models.mock]\nprovider = \"openai\"\n\
         id = \"mock-1\"\nbase_url = {:?}\n\
         [agents.support]\ninstructions = \"Help the customer.\"\n\
         host_tools = [\"read_file\", \"write_file\", \"list_dir\"]\n{extra}",
        mock.base_url()
    )
}

/// The service's API on a free loopback port, stopped when dropped.
pub(crate) struct Service {
    base: String,
    shutdown: CancellationToken,
    store: Arc<dyn ServiceStorage>,
    paths: Paths,
    _root: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Service {
    /// Serves the API with `config` as the user's configuration, warden's folders in a new
    /// temporary folder.
    pub(crate) async fn start(config: &str) -> Self {
        let root = tempfile::tempdir().unwrap();
        let paths = Paths::under_root(root.path());
        let workspace = root.path().join("work");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(paths.config_dir()).unwrap();
        std::fs::write(paths.user_config_file(), config).unwrap();
        let sessions = ConfigOpener::new(paths.clone(), workspace.clone());
        let loaded = sessions.load_config(workspace).unwrap();
        let host = ConfigHost::new(sessions, &loaded);
        let store: Arc<dyn ServiceStorage> =
            Arc::new(SqliteStorage::open(&paths.state_dir().join("service.db")).unwrap());
        let listener = warden_service::bind(([127, 0, 0, 1], 0).into())
            .await
            .unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        tokio::spawn(warden_service::serve(
            listener,
            store.clone(),
            Arc::new(host),
            shutdown.clone(),
        ));
        Self {
            base,
            shutdown,
            store,
            paths,
            _root: root,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The served address, `127.0.0.1:PORT`.
    pub(crate) fn address(&self) -> &str {
        self.base
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
    }

    /// A key of `role` for `caller` of `tenant` (the tenant is made if new).
    pub(crate) async fn key(&self, tenant: &str, caller: &str, role: Role) -> String {
        self.store
            .issue_key(tenant, caller, role)
            .await
            .unwrap()
            .secret
    }

    /// The folder a tenant's session works in (its room's `files`).
    pub(crate) fn room_files(&self, tenant: &str, session: &str) -> std::path::PathBuf {
        self.paths
            .state_dir()
            .join("service/tenants")
            .join(warden_service::tenant_folder(tenant))
            .join("sessions")
            .join(session)
            .join("files")
    }

    pub(crate) async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        send(client().get(self.url(path)).bearer_auth(key)).await
    }

    pub(crate) async fn post(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        send(client().post(self.url(path)).bearer_auth(key).json(&body)).await
    }

    pub(crate) async fn put(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        send(client().put(self.url(path)).bearer_auth(key).json(&body)).await
    }

    /// A new session of profile `support`; its id.
    pub(crate) async fn new_session(&self, key: &str) -> String {
        let (status, session) = self
            .post(key, "/sessions", json!({"agent": "support"}))
            .await;
        assert_eq!(status, 201, "{session}");
        session["id"].as_str().unwrap().to_owned()
    }

    /// Posts the user's `text` to `session` (a run starts); the answer.
    pub(crate) async fn say(&self, key: &str, session: &str, text: &str) -> Value {
        let (status, accepted) = self
            .post(
                key,
                &format!("/sessions/{session}/messages"),
                json!({"text": text}),
            )
            .await;
        assert_eq!(status, 202, "{accepted}");
        accepted
    }

    /// The session's events so far (each its `event`).
    pub(crate) async fn events(&self, key: &str, session: &str) -> Vec<Value> {
        let (status, page) = self
            .get(key, &format!("/sessions/{session}/events?limit=500"))
            .await;
        assert_eq!(status, 200, "{page}");
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|event| event["event"].clone())
            .collect()
    }

    /// Polls the session's events until the `nth` (from 1) of `kind` arrives; returns it.
    pub(crate) async fn wait_for_nth(
        &self,
        key: &str,
        session: &str,
        kind: &str,
        nth: usize,
    ) -> Value {
        for _ in 0..1200 {
            if let Some(found) = self
                .events(key, session)
                .await
                .into_iter()
                .filter(|event| event["type"] == kind)
                .nth(nth - 1)
            {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no {kind} event arrived in session {session}");
    }

    /// Polls the session's events until one of `kind` arrives; returns it.
    pub(crate) async fn wait_for_event(&self, key: &str, session: &str, kind: &str) -> Value {
        self.wait_for_nth(key, session, kind, 1).await
    }
}

/// The `type` of each event.
pub(crate) fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect()
}
