//! `warden knowledge`: a folder of Markdown, HTML and a file it cannot read added to a collection through the real binary, searched with each chunk's provenance, added again with no work, a document removed, and a missing collection named in a one-line error.

use crate::support::Sandbox;

#[test]
fn a_folder_is_added_searched_with_provenance_and_kept_current() {
    let sandbox = Sandbox::new();
    let docs = sandbox.work().join("docs");
    sandbox.write(
        &docs.join("returns.md"),
        "# Returns\n\nOrders can be returned within 30 days.\n\n## Refunds\n\nA refund goes back to the original card within 5 days.\n",
    );
    sandbox.write(
        &docs.join("shipping.html"),
        "<h1>Shipping</h1><p>Parcels leave the warehouse the same day.</p><script>steal()</script>",
    );
    std::fs::write(docs.join("logo.png"), [0x89, b'P', b'N', b'G', 0]).unwrap();
    let docs_arg = docs.display().to_string();

    let added = sandbox.run(&["knowledge", "add", "manuals", &docs_arg]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    assert!(
        added.stderr.contains("2 added") && added.stderr.contains("1 skipped"),
        "{}",
        added.stderr
    );
    assert!(
        added.stderr.contains("logo.png: not a document"),
        "{}",
        added.stderr
    );

    let hits = sandbox.json(&[
        "knowledge",
        "search",
        "manuals",
        "refund to my card",
        "--json",
    ]);
    let first = &hits[0];
    assert_eq!(first["headings"], serde_json::json!(["Returns", "Refunds"]));
    assert_eq!(first["line_start"], 5);
    assert!(first["path"].as_str().unwrap().ends_with("docs/returns.md"));
    let text = sandbox.ok(&["knowledge", "search", "manuals", "same day parcels"]);
    assert!(text.starts_with("1. "), "{text}");
    assert!(text.contains("shipping.html:1-3 › Shipping"), "{text}");
    assert!(!text.contains("steal"), "scripts are not indexed: {text}");

    let again = sandbox.run(&["knowledge", "add", "manuals", &docs_arg]);
    assert!(
        again
            .stderr
            .contains("2 unchanged, 0 removed, 0 chunks written"),
        "{}",
        again.stderr
    );

    let listed = sandbox.ok(&["knowledge", "list"]);
    assert!(
        listed.contains("manuals  2 documents, 3 chunks"),
        "{listed}"
    );
    let shipping = docs.join("shipping.html").canonicalize().unwrap();
    let removed = sandbox.run(&[
        "knowledge",
        "remove",
        "manuals",
        "--document",
        &shipping.display().to_string(),
    ]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    let none = sandbox.ok(&["knowledge", "search", "manuals", "parcels"]);
    assert!(none.contains("no chunk of manuals matches"), "{none}");

    let missing = sandbox.run(&["knowledge", "search", "policies", "refund"]);
    assert_ne!(missing.code, 0);
    assert!(
        missing.stderr.contains(
            "no collection named \"policies\" (make it with `warden knowledge add policies PATH…`)"
        ),
        "{}",
        missing.stderr
    );
}
