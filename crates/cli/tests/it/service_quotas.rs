//! `warden service`'s quotas through the real binary: runs going, sessions stored, event streams open and requests per minute, each per key (a widget token is one) and per tenant — over one a request is refused with 429, a `Retry-After` and the quota named, nothing is stored, and another key or tenant goes on — and a client call that nobody answers lapses: the model reads an error, the run finishes, a late answer is refused. An ignored test measures the open files a waiting run and a stream take (docs/SERVICE.md, "Quotas").

use std::time::Duration;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};

use crate::service_api::{Service, client, key, send, service_config, wait_for_event};
use crate::support::Sandbox;

/// The support profile with the client tool `show_map` (allowed without asking), then `extra`
/// (the `[service]` tables).
fn config(mock: &MockModel, extra: &str) -> String {
    format!(
        "{}[agents.support.client_tools.show_map]\ndescription = \"Shows a map.\"\ninput_schema = {{ type = \"object\", properties = {{ place = {{ type = \"string\" }} }} }}\n[permissions]\nallow = [\"show_map\"]\n{extra}",
        service_config(mock)
    )
}

/// [`config`] with `quotas` (a `[service.quotas]` table), on the PostgreSQL database when
/// given.
fn config_on(mock: &MockModel, database: &Option<String>, quotas: &str) -> String {
    let service = database
        .as_deref()
        .map(|url| {
            format!(
                "[service]\ndatabase_url = {}\n",
                crate::support::toml_str(url)
            )
        })
        .unwrap_or_default();
    config(mock, &format!("{service}{quotas}"))
}

on_both_stores!(
    runs_over_a_key_s_or_a_tenant_s_quota_are_refused_and_start_nothing,
    sessions_over_a_key_s_a_widget_token_s_or_a_tenant_s_quota_are_refused_and_not_stored,
    streams_over_a_key_s_quota_are_refused_and_a_closed_stream_frees_its_place,
    requests_over_a_key_s_or_a_tenant_s_rate_are_refused_with_a_wait,
);

/// A session of the support profile made with `key`; its id.
async fn support_session(service: &Service, key: &str) -> String {
    let (status, session) = send(
        client()
            .post(service.url("/sessions"))
            .bearer_auth(key)
            .json(&json!({"agent": "support"})),
    )
    .await;
    assert_eq!(status, 201, "{session}");
    session["id"].as_str().unwrap().to_owned()
}

/// A request's status, its `Retry-After` and its JSON body.
async fn send_full(request: reqwest::RequestBuilder) -> (u16, Option<u64>, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|value| value.to_str().unwrap().parse::<u64>().unwrap());
    let text = response.text().await.unwrap();
    (
        status,
        retry_after,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// Asserts a 429 with a `Retry-After` of at least a second and a reason containing each of
/// `needles`; the reason.
fn assert_refused(answer: &(u16, Option<u64>, Value), needles: &[&str]) -> String {
    let (status, retry_after, body) = answer;
    assert_eq!(*status, 429, "{body}");
    assert!(
        retry_after.is_some_and(|seconds| seconds >= 1),
        "{answer:?}"
    );
    let reason = body["error"].as_str().unwrap_or_default().to_owned();
    for needle in needles {
        assert!(reason.contains(needle), "{needle:?} not in {reason:?}");
    }
    reason
}

/// Posts `text` to `session` with `key`: status, `Retry-After`, body.
async fn say(service: &Service, key: &str, session: &str, text: &str) -> (u16, Option<u64>, Value) {
    send_full(
        client()
            .post(service.url(&format!("/sessions/{session}/messages")))
            .bearer_auth(key)
            .json(&json!({"text": text})),
    )
    .await
}

/// Starts a run of `session` that waits on a `show_map` client call; the call's id.
async fn run_waiting_on_a_client_call(
    service: &Service,
    mock: &MockModel,
    key: &str,
    session: &str,
) -> String {
    mock.push_turn(Turn::tool_call(
        "call_1",
        "show_map",
        json!({"place": "Paris"}),
    ));
    let answer = say(service, key, session, "Show me Paris.").await;
    assert_eq!(answer.0, 202, "{answer:?}");
    let pending = wait_for_event(service, key, session, "client_call_pending").await;
    pending["call"]["id"].as_str().unwrap().to_owned()
}

/// Answers the client call `call` of `session`; the status.
async fn answer(service: &Service, key: &str, session: &str, call: &str) -> (u16, Value) {
    send(
        client()
            .post(service.url(&format!("/sessions/{session}/client-calls/{call}")))
            .bearer_auth(key)
            .json(&json!({"result": "map shown"})),
    )
    .await
}

/// The events stored for `session`.
async fn events(service: &Service, key: &str, session: &str) -> Vec<Value> {
    let (status, page) = send(
        client()
            .get(service.url(&format!("/sessions/{session}/events?limit=500")))
            .bearer_auth(key),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    page["events"].as_array().unwrap().clone()
}

/// The ids of the tenant's sessions.
async fn session_ids(service: &Service, key: &str) -> Vec<String> {
    let (status, listed) = send(client().get(service.url("/sessions")).bearer_auth(key)).await;
    assert_eq!(status, 200, "{listed}");
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn runs_over_a_key_s_or_a_tenant_s_quota_are_refused_and_start_nothing(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config_on(
        &mock,
        &database,
        "[service.quotas]
runs = 3
runs_per_key = 2
",
    ));
    let app = key(&sandbox, "acme", "web-app");
    let ops = key(&sandbox, "acme", "ops");
    let other = key(&sandbox, "globex", "web-app");
    let service = Service::start(&sandbox).await;
    let sessions: Vec<String> = {
        let mut made = Vec::new();
        for _ in 0..3 {
            made.push(support_session(&service, &app).await);
        }
        made
    };
    let first = run_waiting_on_a_client_call(&service, &mock, &app, &sessions[0]).await;
    run_waiting_on_a_client_call(&service, &mock, &app, &sessions[1]).await;

    // The key's third run is refused: nothing is stored, the session stays idle.
    let refused = say(&service, &app, &sessions[2], "One more.").await;
    let reason = assert_refused(&refused, &["this key has 2 runs going", "runs_per_key"]);
    assert!(reason.contains("[service.quotas]"), "{reason}");
    assert!(events(&service, &app, &sessions[2]).await.is_empty());
    let (_, shown) = send(
        client()
            .get(service.url(&format!("/sessions/{}", sessions[2])))
            .bearer_auth(&app),
    )
    .await;
    assert_eq!(shown["session"]["state"], "idle");
    assert_eq!(shown["messages"], json!([]));

    // Another key of the tenant takes the tenant's third place; then the tenant is full, and
    // the next run of either key is refused naming the tenant's quota.
    let theirs = support_session(&service, &ops).await;
    run_waiting_on_a_client_call(&service, &mock, &ops, &theirs).await;
    let fourth = support_session(&service, &ops).await;
    let refused = say(&service, &ops, &fourth, "And one more.").await;
    assert_refused(
        &refused,
        &["tenant acme has 3 runs going", "[service.quotas] runs"],
    );
    assert!(events(&service, &ops, &fourth).await.is_empty());

    // Another tenant runs at the same moment.
    let elsewhere = support_session(&service, &other).await;
    mock.push_turn(Turn::text("Hello from globex."));
    assert_eq!(say(&service, &other, &elsewhere, "Hi.").await.0, 202);
    wait_for_event(&service, &other, &elsewhere, "run_finished").await;

    // A run that ends frees its place: the refused message goes through on a retry.
    mock.push_turn(Turn::text("Paris is on your screen."));
    assert_eq!(answer(&service, &app, &sessions[0], &first).await.0, 200);
    wait_for_event(&service, &app, &sessions[0], "run_finished").await;
    mock.push_turn(Turn::text("Here is one more."));
    let mut accepted = None;
    for _ in 0..1200 {
        let answer = say(&service, &app, &sessions[2], "One more.").await;
        if answer.0 == 202 {
            accepted = Some(answer);
            break;
        }
        assert_eq!(answer.0, 429, "{answer:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(accepted.is_some(), "the freed place is taken");
    let finished = wait_for_event(&service, &app, &sessions[2], "run_finished").await;
    assert_eq!(finished["final_text"], "Here is one more.");
    // The refusals were logged, with the key and the quota, and audited for the tenant.
    let line = service.wait_for_log("refused with 429").await;
    assert!(line.contains("runs"), "{line}");
    let (status, audit) = send(
        client()
            .get(service.url("/audit?limit=500"))
            .bearer_auth(&app),
    )
    .await;
    assert_eq!(status, 200, "{audit}");
    let refusals: Vec<&Value> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["kind"] == "quota-refusal")
        .collect();
    let names: Vec<&str> = refusals
        .iter()
        .map(|record| record["public_name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"quota:runs_per_key"), "{names:?}");
    assert!(names.contains(&"quota:runs"), "{names:?}");
    assert!(
        refusals
            .iter()
            .all(|record| record["tenant"] == "acme" && record["decision"] == "denied"),
        "{refusals:?}"
    );
    // Another tenant sees none of them.
    let (_, theirs) = send(
        client()
            .get(service.url("/audit?limit=500"))
            .bearer_auth(&other),
    )
    .await;
    assert!(!theirs.to_string().contains("quota-refusal"), "{theirs}");
}

async fn sessions_over_a_key_s_a_widget_token_s_or_a_tenant_s_quota_are_refused_and_not_stored(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config_on(
        &mock,
        &database,
        "[service.quotas]
sessions = 8
sessions_per_key = 3
",
    ));
    let app = key(&sandbox, "acme", "web-app");
    let ops = key(&sandbox, "acme", "ops");
    let other = key(&sandbox, "globex", "web-app");
    let service = Service::start(&sandbox).await;
    let mut mine = Vec::new();
    for _ in 0..3 {
        mine.push(support_session(&service, &app).await);
    }
    let create = |key: &str| {
        client()
            .post(service.url("/sessions"))
            .bearer_auth(key)
            .json(&json!({"agent": "support"}))
    };
    let refused = send_full(create(&app)).await;
    assert_refused(
        &refused,
        &[
            "this key created 3 sessions",
            "[service.quotas] sessions_per_key",
        ],
    );
    assert_eq!(session_ids(&service, &app).await.len(), 3, "nothing stored");

    // A widget token is limited like a key: its own three sessions, then 429.
    let (status, minted) = send(
        client()
            .post(service.url("/widget-tokens"))
            .bearer_auth(&app)
            .json(&json!({"agent": "support", "caller": "customer-7"})),
    )
    .await;
    assert_eq!(status, 201, "{minted}");
    let widget = minted["token"].as_str().unwrap().to_owned();
    for _ in 0..3 {
        support_session(&service, &widget).await;
    }
    let refused = send_full(create(&widget)).await;
    assert_refused(
        &refused,
        &["this widget token created 3 sessions", "sessions_per_key"],
    );
    assert_eq!(session_ids(&service, &app).await.len(), 6);

    // Another key goes on until the tenant's eight are stored.
    support_session(&service, &ops).await;
    support_session(&service, &ops).await;
    let refused = send_full(create(&ops)).await;
    assert_refused(
        &refused,
        &["tenant acme keeps 8 sessions", "[service.quotas] sessions"],
    );
    assert_eq!(session_ids(&service, &app).await.len(), 8);
    // Another tenant is not touched.
    support_session(&service, &other).await;

    // Deleting one frees a place for its key.
    let (status, _) = send(
        client()
            .delete(service.url(&format!("/sessions/{}", mine[0])))
            .bearer_auth(&app),
    )
    .await;
    assert_eq!(status, 204);
    support_session(&service, &app).await;
    assert_eq!(session_ids(&service, &app).await.len(), 8);
}

async fn streams_over_a_key_s_quota_are_refused_and_a_closed_stream_frees_its_place(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config_on(
        &mock,
        &database,
        "[service.quotas]
streams = 3
streams_per_key = 2
",
    ));
    let app = key(&sandbox, "acme", "web-app");
    let ops = key(&sandbox, "acme", "ops");
    let other = key(&sandbox, "globex", "web-app");
    let service = Service::start(&sandbox).await;
    // A run waiting on a client call: its streams stay open.
    let id = support_session(&service, &app).await;
    let call = run_waiting_on_a_client_call(&service, &mock, &app, &id).await;
    let open = |key: &str| {
        client()
            .get(service.url(&format!("/sessions/{id}/events/stream?after=0")))
            .bearer_auth(key)
            .send()
    };
    let first = open(&app).await.unwrap();
    assert_eq!(first.status(), 200);
    let second = open(&app).await.unwrap();
    assert_eq!(second.status(), 200);
    let refused = send_full(
        client()
            .get(service.url(&format!("/sessions/{id}/events/stream?after=0")))
            .bearer_auth(&app),
    )
    .await;
    assert_refused(
        &refused,
        &[
            "this key has 2 event streams open",
            "[service.quotas] streams_per_key",
        ],
    );
    // Another key of the tenant takes the tenant's third; then the tenant is full.
    let third = open(&ops).await.unwrap();
    assert_eq!(third.status(), 200);
    let refused = send_full(
        client()
            .get(service.url(&format!("/sessions/{id}/events/stream?after=0")))
            .bearer_auth(&ops),
    )
    .await;
    assert_refused(
        &refused,
        &["tenant acme has 3 event streams open", "streams"],
    );
    // Another tenant's stream opens at the same moment (its own session, no run: it ends).
    let theirs = support_session(&service, &other).await;
    let (status, _, _) = send_full(
        client()
            .get(service.url(&format!("/sessions/{theirs}/events/stream")))
            .bearer_auth(&other),
    )
    .await;
    assert_eq!(status, 200);

    // The client closes one: its place is freed (at the latest at the stream's next keep-alive).
    drop(first);
    let mut reopened = None;
    for _ in 0..1200 {
        let response = open(&app).await.unwrap();
        if response.status() == 200 {
            reopened = Some(response);
            break;
        }
        assert_eq!(response.status(), 429);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reopened = reopened.expect("a closed stream frees its place");
    // The run ends; so do its streams, and every stream saw it.
    mock.push_turn(Turn::text("Paris is on your screen."));
    assert_eq!(answer(&service, &app, &id, &call).await.0, 200);
    for stream in [second, third, reopened] {
        let text = tokio::time::timeout(Duration::from_secs(120), stream.text())
            .await
            .expect("the stream ends with the run")
            .unwrap();
        assert!(text.contains("run_finished"), "{text}");
    }
    // Every place is free again.
    let again = open(&app).await.unwrap();
    assert_eq!(again.status(), 200);
}

async fn requests_over_a_key_s_or_a_tenant_s_rate_are_refused_with_a_wait(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    // One request per 20 s once the burst is spent (per key), one per 10 s for the tenant.
    sandbox.user_config(&config_on(
        &mock,
        &database,
        "[service.quotas]
requests_per_minute = 6
requests_per_minute_per_key = 3
",
    ));
    let app = key(&sandbox, "acme", "web-app");
    let ops = key(&sandbox, "acme", "ops");
    let other = key(&sandbox, "globex", "web-app");
    let service = Service::start(&sandbox).await;
    let list = |key: &str| client().get(service.url("/sessions")).bearer_auth(key);
    // The burst is the minute's whole count; then 429 until a request is due again.
    let mut passed = 0;
    let refused = loop {
        let answer = send_full(list(&app)).await;
        if answer.0 != 200 {
            break answer;
        }
        passed += 1;
        assert!(passed <= 10, "the key's rate is never enforced");
    };
    assert!(passed >= 3, "the burst is {passed}");
    let reason = assert_refused(
        &refused,
        &[
            "this key sent more than 3 requests in a minute",
            "requests_per_minute_per_key",
        ],
    );
    assert!(reason.contains("retry in"), "{reason}");
    assert!(refused.1.unwrap() <= 60, "{refused:?}");
    // Another key of the tenant goes on, until the tenant's own rate is spent.
    let mut passed_too = 0;
    let refused = loop {
        let answer = send_full(list(&ops)).await;
        if answer.0 != 200 {
            break answer;
        }
        passed_too += 1;
        assert!(passed_too <= 10, "the tenant's rate is never enforced");
    };
    assert!(passed_too >= 1);
    let reason = refused.2["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        reason.contains("tenant acme sent more than 6 requests")
            || reason.contains("this key sent more than 3 requests"),
        "{reason}"
    );
    assert_refused(&refused, &["requests_per_minute"]);
    // Another tenant is not touched.
    assert_eq!(send_full(list(&other)).await.0, 200);
}

#[tokio::test]
async fn a_client_call_nobody_answers_lapses_the_model_reads_an_error_and_the_run_finishes() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, "[service]\nclient_call_timeout_sec = 1\n"));
    let app = key(&sandbox, "acme", "web-app");
    let service = Service::start(&sandbox).await;
    let id = support_session(&service, &app).await;
    // The model calls the tool, then answers whatever the tool's result was.
    mock.push_turn(Turn::tool_call(
        "call_1",
        "show_map",
        json!({"place": "Paris"}),
    ));
    mock.push_turn(Turn::text("The map could not be shown."));
    assert_eq!(say(&service, &app, &id, "Show me Paris.").await.0, 202);
    let pending = wait_for_event(&service, &app, &id, "client_call_pending").await;
    let call = pending["call"]["id"].as_str().unwrap().to_owned();
    let finished = wait_for_event(&service, &app, &id, "run_finished").await;
    assert_eq!(finished["final_text"], "The map could not be shown.");
    let lapsed = wait_for_event(&service, &app, &id, "client_call_lapsed").await;
    assert_eq!(lapsed["call"], call.as_str());
    assert_eq!(lapsed["after_sec"], 1);
    // The model read the lapse as the tool's error.
    let sent = mock.requests()[1].body.to_string();
    assert!(
        sent.contains("the client did not answer within 1 s"),
        "{sent}"
    );
    // Nothing waits any more, and a late answer is refused with the reason.
    let (_, listed) = send(
        client()
            .get(service.url(&format!("/sessions/{id}/client-calls")))
            .bearer_auth(&app),
    )
    .await;
    assert_eq!(listed["client_calls"], json!([]));
    let (status, refused) = answer(&service, &app, &id, &call).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("lapsed"),
        "{refused}"
    );
}

/// How many files the process `pid` has open.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The process `pid`'s open files by kind: a TCP socket listening, or connected from or to one
/// of the `named` ports; a pipe, an anonymous inode's name, or a file's path under the home (a
/// session's id made `ses_…`).
fn open_file_kinds(pid: u32, named: &[(u16, &str)]) -> std::collections::BTreeMap<String, usize> {
    let name = |port: u16| {
        named
            .iter()
            .find(|(known, _)| *known == port)
            .map_or_else(|| format!("port {port}"), |(_, name)| (*name).to_owned())
    };
    // A TCP socket's state and ports, by inode (`/proc/PID/net/tcp`: local, remote, state, …).
    let mut tcp = std::collections::HashMap::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = |address: &str| {
                u16::from_str_radix(address.rsplit(':').next().unwrap_or("0"), 16).unwrap_or(0)
            };
            let (local, remote) = (port(fields[1]), port(fields[2]));
            let described = if fields[3] == "0A" {
                if named.iter().any(|(known, _)| *known == local) {
                    format!("tcp: {} listening", name(local))
                } else {
                    "tcp: listening on a port of its own".to_owned()
                }
            } else if named.iter().any(|(known, _)| *known == local) {
                format!("tcp: a connection to {}", name(local))
            } else {
                format!("tcp: a connection to {}", name(remote))
            };
            tcp.insert(fields[9].to_owned(), described);
        }
    }
    let mut kinds = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let Ok(target) = std::fs::read_link(entry.unwrap().path()) else {
            continue;
        };
        let target = target.display().to_string();
        let kind = if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|rest| rest.strip_suffix(']'))
        {
            tcp.get(inode)
                .cloned()
                .unwrap_or_else(|| "socket (not tcp)".to_owned())
        } else if target.starts_with("pipe:") {
            "pipe".to_owned()
        } else if let Some(inode) = target.strip_prefix("anon_inode:") {
            inode.to_owned()
        } else {
            target
                .split('/')
                .map(|part| {
                    if part.starts_with("ses_") {
                        "ses_…"
                    } else {
                        part
                    }
                })
                .skip_while(|part| *part != "home")
                .collect::<Vec<_>>()
                .join("/")
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// What `after` has more of than `before`, by kind.
fn grown(
    before: &std::collections::BTreeMap<String, usize>,
    after: &std::collections::BTreeMap<String, usize>,
) -> String {
    after
        .iter()
        .filter_map(|(kind, count)| {
            let more = count.saturating_sub(before.get(kind).copied().unwrap_or(0));
            (more > 0).then(|| format!("{kind} +{more}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The measurement behind the defaults of `[service.quotas]` (docs/SERVICE.md, "Quotas"):
/// the open files of a service with no run, then with `RUNS` runs each waiting on a client
/// call, then with `STREAMS` event streams open on them. Prints the figures; run it with
/// `cargo nextest run -p warden-cli --test it -E 'test(open_files_per)' --run-ignored only
/// --no-capture`.
#[tokio::test]
#[ignore = "a measurement: prints figures, asserts only that the counts grew"]
async fn open_files_per_waiting_run_and_per_stream() {
    const RUNS: usize = 50;
    const STREAMS: usize = 200;
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(
        &mock,
        "[service.quotas]\nruns = 100000\nruns_per_key = 100000\nstreams = 100000\nstreams_per_key = 100000\nrequests_per_minute = 1000000\nrequests_per_minute_per_key = 1000000\n",
    ));
    let app = key(&sandbox, "acme", "web-app");
    let service = Service::start(&sandbox).await;
    // One run first, so what every run shares (the audit database, the model's client) is
    // open before the count starts.
    let warm = support_session(&service, &app).await;
    let call = run_waiting_on_a_client_call(&service, &mock, &app, &warm).await;
    mock.push_turn(Turn::text("done"));
    answer(&service, &app, &warm, &call).await;
    wait_for_event(&service, &app, &warm, "run_finished").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let named = [
        (service.address().port(), "the service"),
        (mock.addr().port(), "the model"),
    ];
    let idle = open_files(service.pid());
    let idle_kinds = open_file_kinds(service.pid(), &named);
    let mut sessions = Vec::new();
    for _ in 0..RUNS {
        let id = support_session(&service, &app).await;
        run_waiting_on_a_client_call(&service, &mock, &app, &id).await;
        sessions.push(id);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let with_runs = open_files(service.pid());
    let run_kinds = open_file_kinds(service.pid(), &named);
    let mut streams = Vec::new();
    for index in 0..STREAMS {
        let id = &sessions[index % sessions.len()];
        let response = client()
            .get(service.url(&format!("/sessions/{id}/events/stream?after=0")))
            .bearer_auth(&app)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        streams.push(response);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let with_streams = open_files(service.pid());
    let stream_kinds = open_file_kinds(service.pid(), &named);
    #[allow(clippy::cast_precision_loss)]
    let (per_run, per_stream) = (
        (with_runs - idle) as f64 / RUNS as f64,
        (with_streams - with_runs) as f64 / STREAMS as f64,
    );
    println!(
        "open files: {idle} idle; {with_runs} with {RUNS} runs waiting on a client call ({per_run:.2} a run); {with_streams} with {STREAMS} streams open besides ({per_stream:.2} a stream)"
    );
    println!("the runs added: {}", grown(&idle_kinds, &run_kinds));
    println!("the streams added: {}", grown(&run_kinds, &stream_kinds));
    // What a request costs: pages of events read by 8 clients at once, as fast as answered.
    let shared = client();
    let started = std::time::Instant::now();
    let readers = (0..8).map(|reader| {
        let (shared, app, id) = (shared.clone(), app.clone(), sessions[reader].clone());
        let url = service.url(&format!("/sessions/{id}/events?limit=10"));
        tokio::spawn(async move {
            for _ in 0..250 {
                let response = shared.get(&url).bearer_auth(&app).send().await.unwrap();
                assert_eq!(response.status(), 200);
                response.bytes().await.unwrap();
            }
        })
    });
    for reader in futures::future::join_all(readers).await {
        reader.unwrap();
    }
    let elapsed = started.elapsed();
    println!(
        "2000 event pages read by 8 clients in {:.2} s: {:.0} requests a second",
        elapsed.as_secs_f64(),
        2000.0 / elapsed.as_secs_f64()
    );
    assert!(with_runs > idle && with_streams > with_runs);
}
