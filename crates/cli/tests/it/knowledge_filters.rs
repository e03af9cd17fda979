//! `warden knowledge` beyond text files, through the real binary: a PDF read by the configured `pdftotext` with the pages of each passage, a scan without a text layer told to get OCR, documents tagged and searched by tag and path glob, and a `/v1/rerank` reranker (a small local server in the test that scores deterministically: a stand-in is allowed for a reranker) that reorders the fused candidates, and whose failures leave the fused order with a note saying why.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use warden_testkit::{PdfPage, pdf};

use crate::support::Sandbox;

const PDFTOTEXT: &str =
    "[knowledge]\nconverters = { pdf = [\"pdftotext\", \"-layout\", \"{path}\", \"-\"] }\n";

#[test]
fn a_pdf_is_read_by_its_converter_with_pages_and_a_scan_is_told_to_get_ocr() {
    warden_testkit::require_or_skip!(warden_testkit::pdftotext());
    let sandbox = Sandbox::new();
    let docs = sandbox.work().join("manuals");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("handbook.pdf"),
        pdf(&[
            PdfPage::Text(&["Returns", "Orders can be returned within thirty days."]),
            PdfPage::Text(&[
                "Refunds",
                "A refund goes back to the original card within five days.",
            ]),
        ]),
    )
    .unwrap();
    std::fs::write(docs.join("scan.pdf"), pdf(&[PdfPage::Drawing])).unwrap();
    let docs_arg = docs.display().to_string();

    // No converter set: each PDF is skipped with the line that sets one.
    let unset = sandbox.run(&["knowledge", "add", "manuals", &docs_arg]);
    assert_eq!(unset.code, 0, "{}", unset.stderr);
    assert!(
        unset.stderr.contains("2 skipped")
            && unset
                .stderr
                .contains("[knowledge] converters = { pdf = [\"pdftotext\""),
        "{}",
        unset.stderr
    );

    sandbox.user_config(PDFTOTEXT);
    let added = sandbox.run(&["knowledge", "add", "manuals", &docs_arg]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    assert!(
        added.stderr.contains("1 added") && added.stderr.contains("1 skipped"),
        "{}",
        added.stderr
    );
    assert!(
        added
            .stderr
            .contains("scan.pdf: no text layer (a scanned PDF?): run OCR first"),
        "{}",
        added.stderr
    );

    let hits = sandbox.json(&[
        "knowledge",
        "search",
        "manuals",
        "refund original card",
        "--json",
    ]);
    let first = &hits[0];
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .contains("original card within five days"),
        "{hits}"
    );
    assert_eq!(
        (first["page_start"].clone(), first["page_end"].clone()),
        (json!(2), json!(2)),
        "{hits}"
    );
    let returns = sandbox.json(&["knowledge", "search", "manuals", "thirty days", "--json"]);
    assert_eq!(returns[0]["page_start"], 1, "{returns}");
    let text = sandbox.ok(&["knowledge", "search", "manuals", "refund original card"]);
    assert!(text.contains("handbook.pdf:"), "{text}");
    assert!(text.contains("(page 2)"), "{text}");

    // A converter that cannot start names itself and the setting to change.
    sandbox.user_config(
        "[knowledge]\nconverters = { pdf = [\"warden-no-such-pdftotext\", \"{path}\"] }\n",
    );
    std::fs::write(
        docs.join("handbook.pdf"),
        pdf(&[PdfPage::Text(&["Changed"])]),
    )
    .unwrap();
    let broken = sandbox.run(&["knowledge", "add", "manuals", &docs_arg]);
    assert!(
        broken
            .stderr
            .contains("the converter `warden-no-such-pdftotext` could not start")
            && broken.stderr.contains("converters.pdf"),
        "{}",
        broken.stderr
    );
    // The document keeps what it had.
    let kept = sandbox.json(&["knowledge", "search", "manuals", "refund", "--json"]);
    assert_eq!(kept[0]["page_start"], 2, "{kept}");
}

#[test]
fn tagged_documents_are_searched_by_tag_and_by_path_glob() {
    let sandbox = Sandbox::new();
    let docs = sandbox.work().join("docs");
    sandbox.write(
        &docs.join("policies/refunds.md"),
        "# Refunds\n\nA refund goes back to the card. Refund requests take a day.\n",
    );
    sandbox.write(
        &docs.join("faq/refunds.md"),
        "# Refund questions\n\nCan I get a refund? Yes, within thirty days.\n",
    );
    sandbox.write(
        &docs.join("faq/shipping.md"),
        "# Shipping\n\nParcels leave the same day.\n",
    );
    let policies = docs.join("policies").display().to_string();
    let faq = docs.join("faq").display().to_string();
    let tagged = sandbox.run(&[
        "knowledge",
        "add",
        "support",
        &policies,
        "--tag",
        "policy",
        "--tag",
        "lang:en",
    ]);
    assert_eq!(tagged.code, 0, "{}", tagged.stderr);
    let plain = sandbox.run(&["knowledge", "add", "support", &faq]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);

    let shown = sandbox.ok(&["knowledge", "show", "support"]);
    assert!(
        shown.contains("policies/refunds.md  1 chunks  tags: lang:en, policy"),
        "{shown}"
    );
    let paths = |hits: &Value| -> Vec<String> {
        hits.as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["path"].as_str().unwrap().to_owned())
            .collect()
    };
    let everything = sandbox.json(&["knowledge", "search", "support", "refund", "--json"]);
    assert_eq!(paths(&everything).len(), 2, "{everything}");
    let policy = sandbox.json(&[
        "knowledge",
        "search",
        "support",
        "refund",
        "--tag",
        "policy",
        "--limit",
        "1",
        "--json",
    ]);
    let policy = paths(&policy);
    assert!(
        policy.len() == 1 && policy[0].ends_with("policies/refunds.md"),
        "{policy:?}"
    );
    let faq_hits = sandbox.json(&[
        "knowledge",
        "search",
        "support",
        "refund",
        "--path",
        "faq/*",
        "--json",
    ]);
    let faq_hits = paths(&faq_hits);
    assert!(
        faq_hits.len() == 1 && faq_hits[0].ends_with("faq/refunds.md"),
        "{faq_hits:?}"
    );
    let none = sandbox.ok(&[
        "knowledge",
        "search",
        "support",
        "refund",
        "--path",
        "faq/*",
        "--tag",
        "policy",
    ]);
    assert!(none.contains("no chunk of support matches"), "{none}");
    let bad = sandbox.run(&["knowledge", "search", "support", "refund", "--tag", "a b"]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("tag \"a b\": letters, digits"),
        "{}",
        bad.stderr
    );
}

/// What the reranker was asked, and how it answers.
#[derive(Default)]
struct Reranker {
    requests: Vec<Value>,
    /// `ok`: scores each document by how often it says "warranty", then by its position from the
    /// end; `500`; `garbage`: an index out of range.
    mode: &'static str,
}

fn start_reranker() -> (String, Arc<Mutex<Reranker>>) {
    use axum::extract::State;
    use axum::response::IntoResponse;
    let state = Arc::new(Mutex::new(Reranker {
        mode: "ok",
        ..Reranker::default()
    }));
    async fn rerank(
        State(state): State<Arc<Mutex<Reranker>>>,
        axum::Json(request): axum::Json<Value>,
    ) -> axum::response::Response {
        let mut state = state.lock().unwrap();
        state.requests.push(request.clone());
        let documents = request["documents"].as_array().unwrap();
        match state.mode {
            "500" => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "overloaded").into_response(),
            "garbage" => axum::Json(json!({"results": [{"index": 999, "relevance_score": 1.0}]}))
                .into_response(),
            _ => {
                let results: Vec<Value> = documents
                    .iter()
                    .enumerate()
                    .map(|(index, document)| {
                        let mentions = document.as_str().unwrap().matches("warranty").count();
                        json!({"index": index, "relevance_score": mentions as f64 + index as f64 / 100.0})
                    })
                    .collect();
                axum::Json(json!({"results": results})).into_response()
            }
        }
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    let shared = state.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            sender
                .send(format!("http://{}/v1", listener.local_addr().unwrap()))
                .unwrap();
            let app = axum::Router::new()
                .route("/v1/rerank", axum::routing::post(rerank))
                .with_state(shared);
            axum::serve(listener, app).await.unwrap();
        });
    });
    (receiver.recv().unwrap(), state)
}

#[test]
fn a_reranker_reorders_the_fused_candidates_and_a_failing_one_leaves_their_order() {
    let sandbox = Sandbox::new();
    let docs = sandbox.work().join("docs");
    sandbox.write(
        &docs.join("returns.md"),
        "# Returns\n\nReturns of returns: a return is free. Return it within thirty days.\n",
    );
    sandbox.write(
        &docs.join("warranty.md"),
        "# Warranty\n\nA return under warranty is repaired; the warranty lasts two years.\n",
    );
    sandbox.write(
        &docs.join("shipping.md"),
        "# Shipping\n\nA return label comes with every parcel.\n",
    );
    let added = sandbox.run(&["knowledge", "add", "help", &docs.display().to_string()]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    let order = |hits: &Value| -> Vec<String> {
        hits.as_array()
            .unwrap()
            .iter()
            .map(|hit| {
                let path = hit["path"].as_str().unwrap();
                path.rsplit('/').next().unwrap().to_owned()
            })
            .collect()
    };
    let fused = sandbox.json(&[
        "knowledge",
        "search",
        "help",
        "return",
        "--limit",
        "2",
        "--json",
    ]);
    let fused = order(&fused);
    assert_eq!(fused[0], "returns.md", "BM25 alone: {fused:?}");

    let (base, state) = start_reranker();
    sandbox.user_config(&format!(
        "[knowledge]\nreranker = \"local\"\n[rerankers.local]\nbase_url = \"{base}\"\nmodel = \"bge-reranker-base\"\n"
    ));
    let run = sandbox.run(&[
        "knowledge",
        "search",
        "help",
        "return",
        "--limit",
        "2",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let reranked: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(order(&reranked)[0], "warranty.md", "{reranked}");
    assert_eq!(reranked.as_array().unwrap().len(), 2);
    assert!(
        reranked[0]["score"].as_f64().unwrap() >= 2.0,
        "the score is the reranker's: {reranked}"
    );
    {
        let state = state.lock().unwrap();
        let asked = &state.requests[0];
        assert_eq!(asked["model"], "bge-reranker-base");
        assert_eq!(asked["query"], "return");
        assert_eq!(asked["top_n"], 2);
        // Every fused candidate went to it, not just the two asked for.
        assert_eq!(asked["documents"].as_array().unwrap().len(), 3, "{asked}");
    }

    for mode in ["500", "garbage"] {
        state.lock().unwrap().mode = mode;
        let run = sandbox.run(&[
            "knowledge",
            "search",
            "help",
            "return",
            "--limit",
            "2",
            "--json",
        ]);
        assert_eq!(run.code, 0, "{mode}: {}", run.stderr);
        assert!(
            run.stderr.contains("the reranker local failed")
                && run.stderr.contains("the fused order stands"),
            "{mode}: {}",
            run.stderr
        );
        let why = if mode == "500" {
            "answered 500: overloaded"
        } else {
            "not one of the 3 documents"
        };
        assert!(run.stderr.contains(why), "{mode}: {}", run.stderr);
        let hits: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(order(&hits), fused, "{mode}");
    }

    // A reranker elsewhere over plain http would receive the passages in the clear: refused,
    // and the search still answers.
    sandbox.user_config(
        "[knowledge]\nreranker = \"far\"\n[rerankers.far]\nbase_url = \"http://reranker.example/v1\"\nmodel = \"m\"\n",
    );
    let far = sandbox.run(&["knowledge", "search", "help", "return", "--json"]);
    assert_eq!(far.code, 0, "{}", far.stderr);
    assert!(
        far.stderr.contains("must be https") && far.stderr.contains("the fused order stands"),
        "{}",
        far.stderr
    );
    // A reranker named with no entry is a configuration mistake, said as one.
    sandbox.user_config("[knowledge]\nreranker = \"nope\"\n");
    let missing = sandbox.run(&["knowledge", "search", "help", "return"]);
    assert_ne!(missing.code, 0);
    assert!(
        missing
            .stderr
            .contains("there is no [rerankers.nope] in your user config"),
        "{}",
        missing.stderr
    );
}
