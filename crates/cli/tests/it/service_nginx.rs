//! Two `warden service run` processes on one PostgreSQL database behind nginx (Debian's,
//! round-robin): a session made through one continues through the other, an approval posted
//! to one releases the run going on the other, a stream served by one shows the other's events,
//! and the instance killed with SIGKILL in the middle of a slow tool call has its session
//! reported interrupted (by the other, once the lease lapses), resumed through the survivor with
//! every acknowledged event and audit record kept and the call in flight answered "outcome
//! unknown", never run again.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};

use crate::service_api::{Service, client, service_config};
use crate::support::{Sandbox, echo_server, toml_str};

/// nginx in front of the instances, and the key every request carries.
struct Balancer {
    nginx: warden_testkit::Nginx,
    key: String,
}

/// An answer through nginx: status, body, and the instance that served it.
struct Served {
    status: u16,
    body: Value,
    by: SocketAddr,
}

/// The backend that served a response (the last one nginx tried).
fn served_by(response: &reqwest::Response) -> SocketAddr {
    let header = response
        .headers()
        .get(warden_testkit::UPSTREAM_HEADER)
        .expect("nginx names the backend")
        .to_str()
        .unwrap();
    header.rsplit(", ").next().unwrap().trim().parse().unwrap()
}

impl Balancer {
    fn url(&self, path: &str) -> String {
        format!("{}/v1{path}", self.nginx.base())
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Served {
        let response = request.bearer_auth(&self.key).send().await.unwrap();
        let by = served_by(&response);
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        Served {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
            by,
        }
    }

    async fn get(&self, path: &str) -> Served {
        self.send(client().get(self.url(path))).await
    }

    /// Makes nginx's next request go to `to`: round-robin alternates, so a cheap request is
    /// sent until one lands on the other instance.
    async fn steer(&self, to: SocketAddr) {
        for _ in 0..4 {
            if self.get("/sessions").await.by != to {
                return;
            }
        }
        panic!(
            "nginx never served from the other instance: {}",
            self.nginx.error_log()
        );
    }

    /// Sends `request` through nginx to the instance at `to`.
    async fn send_to(&self, to: SocketAddr, request: reqwest::RequestBuilder) -> Served {
        self.steer(to).await;
        let served = self.send(request).await;
        assert_eq!(served.by, to, "round-robin sent it to {}", served.by);
        served
    }

    /// The session's events, oldest first.
    async fn events(&self, session: &str) -> Vec<Value> {
        let page = self
            .get(&format!("/sessions/{session}/events?after=0&limit=500"))
            .await;
        assert_eq!(page.status, 200, "{}", page.body);
        page.body["events"].as_array().unwrap().clone()
    }

    /// Polls the events (through either instance) until one of `kind` is there; returns it.
    async fn wait_for(&self, session: &str, kind: &str) -> Value {
        for _ in 0..1200 {
            if let Some(found) = self
                .events(session)
                .await
                .into_iter()
                .find(|event| event["event"]["type"] == kind)
            {
                return found["event"].clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no {kind} event in session {session}");
    }

    /// The session's audit records, oldest first.
    async fn audit(&self, session: &str) -> Vec<Value> {
        let page = self.get(&format!("/audit?session={session}")).await;
        assert_eq!(page.status, 200, "{}", page.body);
        page.body["records"].as_array().unwrap().clone()
    }
}

/// An SSE stream read in the background: the events' data as they arrive.
async fn follow(response: reqwest::Response) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    tokio::spawn(async move {
        let mut response = response;
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                for line in block.lines() {
                    if let Some(data) = line.strip_prefix("data:")
                        && let Ok(value) = serde_json::from_str::<Value>(data.trim())
                    {
                        into.lock().unwrap().push(value);
                    }
                }
            }
        }
    });
    seen
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| {
            event
                .get("event")
                .unwrap_or(event)
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_behind_nginx_share_sessions_and_a_killed_one_s_run_is_resumed_by_the_other()
{
    let server = warden_testkit::require_or_skip!(warden_testkit::postgres());
    warden_testkit::require_or_skip!(warden_testkit::nginx_bin());
    let mock = MockModel::start().await.unwrap();
    // The first run reads a file (a person must approve); the second calls a slow tool.
    mock.push_turn(Turn::tool_call(
        "call_read",
        "read_file",
        json!({"path": "hello.txt"}),
    ));
    mock.push_turn(Turn::text("The file says hello."));
    mock.push_turn(Turn::tool_call(
        "call_slow",
        "mcp__fx__slow",
        json!({"ms": 600_000}),
    ));
    mock.push_turn(Turn::text("Resumed without running it again."));
    let sandbox = Sandbox::new();
    let ledger = sandbox.work().join("ledger.txt");
    sandbox.user_config(&format!(
        "{}room_template = {}\n{}[tool_settings.read_file]\nrequires_approval = true\n[service]\ndatabase_url = {}\nallow_stdio = true\nself_approval = true\n",
        service_config(&mock),
        toml_str(&sandbox.work().display().to_string()),
        echo_server(
            "fx",
            &format!(
                "env = {{ {} = {} }}\n",
                warden_testkit::fixtures::LEDGER_ENV,
                toml_str(&ledger.display().to_string())
            )
        ),
        toml_str(&server.url())
    ));
    sandbox.write(&sandbox.work().join("hello.txt"), "hello from postgres\n");
    // One approver's key starts the run and decides it (self_approval is on here).
    let acme = crate::service_api::key_as(&sandbox, "acme", "web-app", "approver");
    // A short lease, so the killed instance is noticed within seconds.
    let lease = [(warden_service::LEASE_TTL_ENV, "4")];
    let mut first = Service::start_with(&sandbox, &lease).await;
    let second = Service::start_with(&sandbox, &lease).await;
    let (a, b) = (first.address(), second.address());
    let balancer = Balancer {
        nginx: warden_testkit::Nginx::start(&[a, b]).unwrap(),
        key: acme,
    };

    // Made through B, continued through A: the run goes on A.
    let made = balancer
        .send_to(
            b,
            client()
                .post(balancer.url("/sessions"))
                .json(&json!({"agent": "support"})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.body["id"].as_str().unwrap().to_owned();
    let said = balancer
        .send_to(
            a,
            client()
                .post(balancer.url(&format!("/sessions/{id}/messages")))
                .json(&json!({"text": "What does hello.txt say?"})),
        )
        .await;
    assert_eq!(said.status, 202, "{}", said.body);
    let needed = balancer.wait_for(&id, "approval_needed").await;

    // A stream served by B, while the run goes on A.
    balancer.steer(b).await;
    let stream = client()
        .get(balancer.url(&format!("/sessions/{id}/events/stream")))
        .bearer_auth(&balancer.key)
        .send()
        .await
        .unwrap();
    assert_eq!(served_by(&stream), b);
    assert_eq!(stream.status(), 200);
    let streamed = follow(stream).await;

    // The approval posted to B releases the run on A.
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();
    let decided = balancer
        .send_to(
            b,
            client()
                .post(balancer.url(&format!("/approvals/{approval}")))
                .json(&json!({"decision": "allow_once"})),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    let finished = balancer.wait_for(&id, "run_finished").await;
    assert_eq!(finished["final_text"], "The file says hello.");
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("hello from postgres"),
        "the call ran on A and its result reached the model"
    );
    // B's stream showed what A's run did after the approval, to its end.
    for _ in 0..1200 {
        if kinds(&streamed.lock().unwrap()).contains(&"run_finished".to_owned()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let on_b = kinds(&streamed.lock().unwrap());
    for kind in ["approval_needed", "tool_call_finished", "run_finished"] {
        assert!(
            on_b.contains(&kind.to_owned()),
            "{kind} on B's stream: {on_b:?}"
        );
    }

    // The second run goes on A and calls the slow tool; A dies in the middle of it.
    let said = balancer
        .send_to(
            a,
            client()
                .post(balancer.url(&format!("/sessions/{id}/messages")))
                .json(&json!({"text": "Now wait a while."})),
        )
        .await;
    assert_eq!(said.status, 202, "{}", said.body);
    balancer.wait_for(&id, "tool_call_started").await;
    for _ in 0..1200 {
        if std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .contains("slow start")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What a client has been shown so far: every event and audit record.
    let acknowledged = balancer.events(&id).await;
    let audited = balancer.audit(&id).await;
    let slow: Vec<&Value> = audited
        .iter()
        .filter(|record| record["public_name"] == "mcp__fx__slow")
        .collect();
    assert_eq!(slow.len(), 1, "{audited:?}");
    assert_eq!(
        slow[0]["decision"], "started",
        "its intent, before dispatch"
    );
    first.kill().await;

    // B notices the lapsed lease and reports the session interrupted.
    let mut state = Value::Null;
    for _ in 0..1200 {
        let shown = balancer.get(&format!("/sessions/{id}")).await;
        assert_eq!(shown.status, 200, "{}", shown.body);
        assert_eq!(shown.by, b, "only B is left");
        state = shown.body["session"]["state"].clone();
        if state == "interrupted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state, "interrupted");
    let after_kill = balancer.events(&id).await;
    assert_eq!(
        &after_kill[..acknowledged.len()],
        &acknowledged[..],
        "every acknowledged event is kept as it was"
    );
    assert_eq!(
        kinds(&after_kill[acknowledged.len()..]),
        ["run_interrupted"]
    );
    let audit_after_kill = balancer.audit(&id).await;
    assert_eq!(audit_after_kill, audited, "every audit record is kept");

    // Resumed through B (nginx passes the request on from the dead A): the slow call is
    // answered "outcome unknown" and not run again.
    let said = balancer
        .send(
            client()
                .post(balancer.url(&format!("/sessions/{id}/messages")))
                .json(&json!({"text": "Go on."})),
        )
        .await;
    assert_eq!(said.status, 202, "{}", said.body);
    assert_eq!(said.by, b);
    let finished = balancer.wait_for_nth(&id, "run_finished", 2).await;
    assert_eq!(finished["final_text"], "Resumed without running it again.");
    let events = balancer.events(&id).await;
    assert_eq!(&events[..after_kill.len()], &after_kill[..]);
    let unknown: Vec<&Value> = events
        .iter()
        .filter(|event| event["event"]["type"] == "tool_call_outcome_unknown")
        .collect();
    assert_eq!(unknown.len(), 1, "{events:?}");
    assert_eq!(unknown[0]["event"]["id"], "call_slow");
    assert_eq!(unknown[0]["event"]["name"], "mcp__fx__slow");
    let sent = mock.requests().last().unwrap().body.to_string();
    assert!(
        sent.contains("may or may not have run"),
        "the model is told the call's outcome is unknown: {sent}"
    );
    let ledger = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(ledger.matches("slow start").count(), 1, "{ledger}");
    let audit_end = balancer.audit(&id).await;
    assert_eq!(&audit_end[..audited.len()], &audited[..]);
    assert_eq!(
        audit_end
            .iter()
            .filter(|record| record["public_name"] == "mcp__fx__slow")
            .count(),
        1,
        "{audit_end:?}"
    );
}

impl Balancer {
    /// Polls until the session has `count` events of `kind`; returns the last.
    async fn wait_for_nth(&self, session: &str, kind: &str, count: usize) -> Value {
        for _ in 0..1200 {
            let events = self.events(session).await;
            let found: Vec<&Value> = events
                .iter()
                .filter(|event| event["event"]["type"] == kind)
                .collect();
            if found.len() >= count {
                return found[count - 1]["event"].clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {count} {kind} events in session {session}");
    }
}
