//! The service holds a crowd: a thousand callers, each on its own connection, post a message to their own session at the same moment, and every post is accepted and every run ends — also when the process starts with the customary soft limit of 1,024 open files (the service raises it to the hard limit).

use std::sync::Arc;

use serde_json::json;
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;

use crate::support::{Service, config};

const CALLERS: usize = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_posts_are_each_accepted_and_each_run_ends() {
    // As a process started from a login shell or a unit without LimitNOFILE: the soft limit
    // at 1,024, the hard one higher (each test runs in a process of its own).
    // util-linux's `prlimit` sets it on this process from outside (Debian's base system).
    let lowered = std::process::Command::new("prlimit")
        .args(["--pid", &std::process::id().to_string(), "--nofile=1024:"])
        .status()
        .unwrap();
    assert!(lowered.success());
    assert_eq!(open_file_limits().0, "1024");
    let mock = MockModel::start().await.unwrap();
    for _ in 0..CALLERS {
        mock.push_turn(Turn::text("ok"));
    }
    let limits = format!(
        "[service.quotas]\nruns = {n}\nruns_per_key = {n}\nsessions = {n}\nsessions_per_key = {n}\n\
         streams = {n}\nstreams_per_key = {n}\nrequests_per_minute = 100000\n\
         requests_per_minute_per_key = 100000\n",
        n = CALLERS * 2
    );
    let service = Arc::new(Service::start(&config(&mock, &limits)).await);
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let mut sessions = Vec::with_capacity(CALLERS);
    for _ in 0..CALLERS {
        sessions.push(service.new_session(&acme).await);
    }

    // Each caller on a connection of its own, all at once.
    let start = Arc::new(tokio::sync::Barrier::new(CALLERS));
    let mut posts = tokio::task::JoinSet::new();
    for session in sessions.clone() {
        let (service, acme, start) = (service.clone(), acme.clone(), start.clone());
        posts.spawn(async move {
            let own_connection = warden_net::http_client().loopback().build().unwrap();
            start.wait().await;
            let answer = own_connection
                .post(service.url(&format!("/sessions/{session}/messages")))
                .bearer_auth(&acme)
                .json(&json!({"text": "hello"}))
                .send()
                .await;
            match answer {
                Ok(response) => Ok(response.status().as_u16()),
                Err(error) => Err(format!("{error:?}")),
            }
        });
    }
    let mut failures = Vec::new();
    while let Some(joined) = posts.join_next().await {
        match joined.unwrap() {
            Ok(202) => {}
            other => failures.push(other),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {CALLERS} posts failed, e.g. {:?}",
        failures.len(),
        failures.first()
    );
    for session in &sessions {
        let finished = service.wait_for_event(&acme, session, "run_finished").await;
        assert_eq!(finished["final_text"], "ok");
    }
    let (soft, hard) = open_file_limits();
    assert_eq!(
        soft, hard,
        "the service raised the soft limit to the hard one"
    );
}

/// This process's soft and hard limits of open files, as `/proc/self/limits` shows them.
fn open_file_limits() -> (String, String) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .unwrap();
    let mut numbers = line["Max open files".len()..].split_whitespace();
    (
        numbers.next().unwrap().to_owned(),
        numbers.next().unwrap().to_owned(),
    )
}
