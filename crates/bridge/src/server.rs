//! The bridge server: axum on a random loopback port or on a Unix socket in a private directory
//! ([`BridgeListen`]), every route behind the session's bearer token (401 otherwise), bodies over [`MAX_REQUEST_BYTES`] refused (413), calls through the
//! session's gate with source `tool-cli`; each finished call is told to the session's
//! [`CallObserver`] (its transcript). Dropping the [`Bridge`] stops it.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use warden_host::Host;

use crate::protocol::{
    CallRequest, CallView, ErrorView, Handshake, MAX_REQUEST_BYTES, PROTOCOL_VERSION,
    ResourceRequest, SearchRequest, TOKEN_VAR, UNIX_URL_PREFIX, URL_VAR,
};
use crate::socket::SocketDir;
use crate::views::{self, ViewError, ViewErrorKind};
use warden_net::{BearerToken, RandomError};

/// Why the bridge could not start.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("the tool bridge could not listen on loopback: {0}")]
    Bind(#[source] std::io::Error),
    #[error("the tool bridge could not make its token: {0}")]
    Random(#[from] RandomError),
    #[error("the tool bridge needs a Tokio runtime")]
    NoRuntime,
    #[error(
        "the tool bridge cannot use a Unix socket on this platform: set [discovery] bridge = \"tcp\""
    )]
    UnixUnsupported,
    #[error(
        "no directory gives the tool bridge a Unix socket path of at most {max} bytes (tried {tried}): set XDG_RUNTIME_DIR to a shorter directory, or [discovery] bridge = \"tcp\"",
        max = crate::socket::MAX_SOCKET_PATH_BYTES
    )]
    SocketPathTooLong { tried: String },
    #[error("the tool bridge could not make its private directory {}: {source}", path.display())]
    SocketDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the tool bridge could not listen on the Unix socket {}: {source}", path.display())]
    BindSocket {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where a bridge listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BridgeListen {
    /// `127.0.0.1` on a random port; the URL is `http://127.0.0.1:PORT`.
    Loopback,
    /// A Unix socket (mode 0600) in a fresh private directory (mode 0700) under the first of
    /// `roots` where the path fits (see [`crate::unix_socket_roots`]); the URL is
    /// `unix:/path/to/bridge.sock`. Refused where there are no Unix sockets.
    UnixSocket { roots: Vec<PathBuf> },
}

/// One call made through the bridge, as the gate decided it.
#[derive(Debug, Clone)]
pub struct BridgeCall {
    pub server: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub view: CallView,
}

/// Told of every call that went through the bridge's gate (the agent session installs one that
/// writes its transcript). Called on the request's task: keep it quick.
pub trait CallObserver: Send + Sync {
    fn call_finished(&self, call: &BridgeCall);
}

/// The session's observer, installed after the bridge started.
type ObserverSlot = RwLock<Option<Arc<dyn CallObserver>>>;

/// A running bridge for one session. Dropping it stops the server (and removes its socket).
pub struct Bridge {
    url: String,
    token: BearerToken,
    stop: CancellationToken,
    observer: Arc<ObserverSlot>,
    socket: Option<SocketDir>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("url", &self.url)
            .field("token", &self.token)
            .field("socket", &self.socket)
            .finish()
    }
}

struct BridgeState {
    host: Arc<Host>,
    token: BearerToken,
    observer: Arc<ObserverSlot>,
}

impl BridgeState {
    fn observer(&self) -> Option<Arc<dyn CallObserver>> {
        self.observer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Bridge {
    /// Listens on `127.0.0.1` at a random port with a fresh token and serves `host` on the
    /// current Tokio runtime until dropped.
    pub fn start(host: Arc<Host>) -> Result<Self, BridgeError> {
        Self::start_on(host, BridgeListen::Loopback)
    }

    /// Listens where `listen` says with a fresh token and serves `host` on the current Tokio
    /// runtime until stopped or dropped.
    pub fn start_on(host: Arc<Host>, listen: BridgeListen) -> Result<Self, BridgeError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BridgeError::NoRuntime)?;
        let token = BearerToken::generate()?;
        let observer: Arc<ObserverSlot> = Arc::default();
        let router = router(Arc::new(BridgeState {
            host,
            token: token.clone(),
            observer: observer.clone(),
        }));
        let stop = CancellationToken::new();
        let (url, socket) = match listen {
            BridgeListen::Loopback => {
                let listener =
                    std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                        .map_err(BridgeError::Bind)?;
                listener.set_nonblocking(true).map_err(BridgeError::Bind)?;
                let address = listener.local_addr().map_err(BridgeError::Bind)?;
                let listener = {
                    let _entered = runtime.enter();
                    tokio::net::TcpListener::from_std(listener).map_err(BridgeError::Bind)?
                };
                serve(&runtime, listener, router, stop.clone());
                (format!("http://{address}"), None)
            }
            BridgeListen::UnixSocket { roots } => {
                let socket = SocketDir::create(&roots)?;
                let listener = bind_unix(&runtime, socket.socket())?;
                serve(&runtime, listener, router, stop.clone());
                let url = format!("{UNIX_URL_PREFIX}{}", socket.socket().display());
                (url, Some(socket))
            }
        };
        Ok(Self {
            url,
            token,
            stop,
            observer,
            socket,
        })
    }

    /// Installs the observer told of every later call (replacing an earlier one).
    pub fn observe(&self, observer: Arc<dyn CallObserver>) {
        *self
            .observer
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(observer);
    }

    /// The base URL, e.g. `http://127.0.0.1:40123` or `unix:/run/user/1000/warden/bridge-…/bridge.sock`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The Unix socket's path, when the bridge listens on one.
    pub fn socket_path(&self) -> Option<&FsPath> {
        self.socket.as_ref().map(SocketDir::socket)
    }

    pub fn token(&self) -> &BearerToken {
        &self.token
    }

    /// The variables to export to the bash tool once the handshake succeeded.
    pub fn environment(&self) -> Vec<(String, String)> {
        vec![
            (URL_VAR.to_owned(), self.url.clone()),
            (TOKEN_VAR.to_owned(), self.token.expose().to_owned()),
        ]
    }

    /// Stops accepting requests (a Unix socket and its directory are removed at once); in-flight
    /// ones finish.
    pub fn stop(&self) {
        self.stop.cancel();
        if let Some(socket) = &self.socket {
            socket.remove();
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // The socket directory removes itself when dropped, right after this.
        self.stop.cancel();
    }
}

/// Serves `router` on `listener` until `stop` is cancelled.
fn serve<L>(runtime: &tokio::runtime::Handle, listener: L, router: Router, stop: CancellationToken)
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    runtime.spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::warn!("the tool bridge stopped: {error}");
        }
    });
}

/// Binds the socket in its private directory and makes it owner-only (0600).
#[cfg(unix)]
fn bind_unix(
    runtime: &tokio::runtime::Handle,
    path: &FsPath,
) -> Result<tokio::net::UnixListener, BridgeError> {
    use std::os::unix::fs::PermissionsExt;
    let failed = |source| BridgeError::BindSocket {
        path: path.to_path_buf(),
        source,
    };
    let _entered = runtime.enter();
    let listener = tokio::net::UnixListener::bind(path).map_err(failed)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(failed)?;
    Ok(listener)
}

/// Never reached: the socket directory cannot be made where there are no Unix sockets.
#[cfg(not(unix))]
fn bind_unix(
    _runtime: &tokio::runtime::Handle,
    _path: &FsPath,
) -> Result<tokio::net::TcpListener, BridgeError> {
    Err(BridgeError::UnixUnsupported)
}

fn router(state: Arc<BridgeState>) -> Router {
    Router::new()
        .route("/v1/handshake", get(handshake))
        .route("/v1/servers", get(servers))
        .route("/v1/servers/{server}/tools", get(tools))
        .route("/v1/call", post(call))
        .route("/v1/search", post(search))
        .route("/v1/resources/list", post(list_resources))
        .route("/v1/resources/templates", post(resource_templates))
        .route("/v1/resources/read", post(read_resource))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .with_state(state)
}

fn refusal(status: StatusCode, error: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorView {
            error: error.into(),
            stderr_tail: Vec::new(),
        }),
    )
        .into_response()
}

/// 401 unless the request carries `Authorization: Bearer <token>`; 413 when it announces a body
/// over the limit (the extractors also stop reading at the limit).
async fn authorize(
    State(state): State<Arc<BridgeState>>,
    request: Request,
    next: Next,
) -> Response {
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| state.token.accepts(value));
    if !authorized {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bridge token (WARDEN_BRIDGE_TOKEN)",
        );
    }
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_REQUEST_BYTES as u64) {
        return refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request is over {MAX_REQUEST_BYTES} bytes"),
        );
    }
    next.run(request).await
}

fn answer<T: Serialize>(result: Result<T, ViewError>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(error) => {
            let status = match error.kind {
                ViewErrorKind::BadRequest => StatusCode::BAD_REQUEST,
                ViewErrorKind::Unavailable => StatusCode::BAD_GATEWAY,
            };
            (
                status,
                Json(ErrorView {
                    error: error.message,
                    stderr_tail: error.stderr_tail,
                }),
            )
                .into_response()
        }
    }
}

/// Runs `work` on its own task with a token that is cancelled if the client goes away, so a
/// call still ends in the gate (cancelled, audited) instead of being dropped mid-way.
async fn cancellable<T, F, Fut>(state: &Arc<BridgeState>, work: F) -> Result<T, ViewError>
where
    T: Send + 'static,
    F: FnOnce(Arc<Host>, CancellationToken) -> Fut,
    Fut: Future<Output = Result<T, ViewError>> + Send + 'static,
{
    let cancel = CancellationToken::new();
    let _on_disconnect = cancel.clone().drop_guard();
    let task = tokio::spawn(work(state.host.clone(), cancel));
    task.await.unwrap_or_else(|error| {
        Err(ViewError::unavailable(
            format!("the bridge request failed: {error}"),
            Vec::new(),
        ))
    })
}

async fn handshake(State(state): State<Arc<BridgeState>>) -> Json<Handshake> {
    Json(Handshake {
        protocol: PROTOCOL_VERSION,
        session: state.host.session_id().to_owned(),
    })
}

async fn servers(State(state): State<Arc<BridgeState>>) -> Response {
    Json(views::servers(&state.host)).into_response()
}

async fn tools(State(state): State<Arc<BridgeState>>, Path(server): Path<String>) -> Response {
    answer(
        cancellable(&state, |host, _cancel| async move {
            views::tools(&host, &server).await
        })
        .await,
    )
}

async fn call(State(state): State<Arc<BridgeState>>, Json(request): Json<CallRequest>) -> Response {
    let observer = state.observer();
    answer(
        cancellable(&state, |host, cancel| async move {
            let (server, tool, arguments) = (
                request.server.clone(),
                request.tool.clone(),
                request.arguments.clone(),
            );
            let view = views::call(&host, request, cancel).await?;
            // On the call's own task: recorded even when the client went away meanwhile.
            tell(observer.as_deref(), server, tool, arguments, &view);
            Ok(view)
        })
        .await,
    )
}

async fn search(
    State(state): State<Arc<BridgeState>>,
    Json(request): Json<SearchRequest>,
) -> Response {
    answer(
        cancellable(&state, |host, _cancel| async move {
            views::search(&host, &request.query, request.limit).await
        })
        .await,
    )
}

/// Tells the session's observer (its transcript) of one gated call, if one is installed.
fn tell(
    observer: Option<&dyn CallObserver>,
    server: String,
    tool: String,
    arguments: serde_json::Value,
    view: &CallView,
) {
    if let Some(observer) = observer {
        observer.call_finished(&BridgeCall {
            server,
            tool,
            arguments,
            view: view.clone(),
        });
    }
}

/// The server name a transcript record of a listing across every server carries (as in the
/// audit); a listing of one server, or a read, names that server.
const BUILTIN_SERVER: &str = "builtin";

async fn list_resources(
    State(state): State<Arc<BridgeState>>,
    Json(request): Json<ResourceRequest>,
) -> Response {
    let observer = state.observer();
    answer(
        cancellable(&state, |host, cancel| async move {
            let view = views::list_resources(&host, request.server.as_deref(), cancel).await;
            let arguments = match &request.server {
                Some(server) => serde_json::json!({ "server": server }),
                None => serde_json::json!({}),
            };
            tell(
                observer.as_deref(),
                request
                    .server
                    .clone()
                    .unwrap_or_else(|| BUILTIN_SERVER.to_owned()),
                warden_host::LIST_RESOURCES.to_owned(),
                arguments,
                &view,
            );
            Ok(view)
        })
        .await,
    )
}

async fn resource_templates(
    State(state): State<Arc<BridgeState>>,
    Json(request): Json<ResourceRequest>,
) -> Response {
    answer(
        cancellable(&state, |host, _cancel| async move {
            views::resource_templates(&host, request.server.as_deref()).await
        })
        .await,
    )
}

async fn read_resource(
    State(state): State<Arc<BridgeState>>,
    Json(request): Json<ResourceRequest>,
) -> Response {
    let observer = state.observer();
    answer(
        cancellable(&state, |host, cancel| async move {
            let (Some(server), Some(uri)) = (request.server, request.uri) else {
                return Err(ViewError::bad_request(
                    "give a server and a URI: warden tool resource read SERVER URI",
                ));
            };
            let view = views::read_resource(&host, &server, &uri, cancel).await;
            tell(
                observer.as_deref(),
                server.clone(),
                warden_host::READ_RESOURCE.to_owned(),
                serde_json::json!({ "server": server, "uri": uri }),
                &view,
            );
            Ok(view)
        })
        .await,
    )
}
