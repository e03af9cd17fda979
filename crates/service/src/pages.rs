//! The pages the service serves itself: the operators' console at `/console` (a few hand-written ES modules and one stylesheet, compiled into the binary, no build step) and the chat widget's script at `/widget.js`, each with a strict Content-Security-Policy.

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};

/// The console's policy: only its own scripts, styles and API; no inline code, no framing, no
/// forms posted elsewhere. Data it shows is built as text nodes, never as markup.
pub(crate) const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

/// The widget script's own response: it is a script, never a document, so nothing may load
/// from it. (The page embedding it keeps its own policy; the widget needs `connect-src` to the
/// service and `script-src` for this file there.)
pub(crate) const WIDGET_CSP: &str =
    "default-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

/// The console's files: name under `/console/`, content type, text.
const CONSOLE_FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../console/index.html"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../console/console.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/api.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/dom.js"),
    ),
    (
        "pages/sessions.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/sessions.js"),
    ),
    (
        "pages/approvals.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/approvals.js"),
    ),
    (
        "pages/audit.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/audit.js"),
    ),
    (
        "pages/servers.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/servers.js"),
    ),
    (
        "pages/tools.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/tools.js"),
    ),
    (
        "pages/skills.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/skills.js"),
    ),
    (
        "pages/tenants.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/tenants.js"),
    ),
    (
        "pages/grants.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages/grants.js"),
    ),
];

const WIDGET_JS: &str = include_str!("../widget/widget.js");

/// The routes of the pages (no key needed: they hold no data; the console asks for a key).
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    axum::Router::new()
        .route("/console", get(console_index))
        .route("/console/", get(console_index))
        .route("/console/{*file}", get(console_file))
        .route("/widget.js", get(widget))
}

fn page(content_type: &'static str, csp: &'static str, text: &'static str) -> Response {
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    guard_content(headers, csp, "no-cache");
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// What every body the service serves as a file (a page, a script, an artifact) carries: its
/// content security policy, no type sniffing, and how long it may be cached.
pub(crate) fn guard_content(
    headers: &mut http::HeaderMap,
    csp: &'static str,
    cache_control: &'static str,
) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
}

async fn console_index() -> Response {
    console_file(Path("index.html".to_owned())).await
}

async fn console_file(Path(file): Path<String>) -> Response {
    // Every path under /console that is not a file is the console itself (its own routes).
    let name = if CONSOLE_FILES.iter().any(|(name, _, _)| *name == file) {
        file.as_str()
    } else if file.ends_with(".js") || file.ends_with(".css") {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    } else {
        "index.html"
    };
    let Some((_, content_type, text)) = CONSOLE_FILES.iter().find(|(known, _, _)| *known == name)
    else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let mut response = page(content_type, CONSOLE_CSP, text);
    response
        .headers_mut()
        .insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// The widget's script: loaded by a product page on any origin (it holds no secret).
async fn widget() -> Response {
    let mut response = page("text/javascript; charset=utf-8", WIDGET_CSP, WIDGET_JS);
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("cross-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_console_file_builds_markup_from_strings() {
        // Data reaches the page as text nodes: no file sets innerHTML or writes markup.
        for (name, _, text) in CONSOLE_FILES.iter().chain([&("widget.js", "", WIDGET_JS)]) {
            for forbidden in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!text.contains(forbidden), "{name} uses {forbidden}");
            }
        }
    }
}
