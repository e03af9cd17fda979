//! Resources are read only when advertised (listed or matching a template), skills excepted;
//! prompts check their required arguments before the request.

use std::collections::BTreeMap;

use warden_mcp::FailureKind;

use crate::common;

#[tokio::test]
async fn listed_and_templated_resources_are_readable_others_are_not() {
    let test = common::runtime(vec![common::fixture("docs", "echo")]);
    let runtime = &test.runtime;
    let rows = runtime.resources(None).await.expect("resources");
    assert!(
        rows.iter()
            .any(|row| row.server == "docs" && row.resource.uri == "fixture://readme")
    );

    let readme = runtime
        .read_resource("docs", "fixture://readme")
        .await
        .expect("listed resource");
    assert!(!readme.contents.is_empty());
    let item = runtime
        .read_resource("docs", "fixture://items/7")
        .await
        .expect("templated resource");
    assert!(!item.contents.is_empty());

    let secret = runtime
        .read_resource("docs", "fixture://secret")
        .await
        .expect_err("not advertised");
    assert_eq!(secret.kind(), FailureKind::NotAdvertised);
    let nested = runtime
        .read_resource("docs", "fixture://items/7/../../secret")
        .await
        .expect_err("not a match");
    assert_eq!(nested.kind(), FailureKind::NotAdvertised);
    let skill = runtime
        .read_resource("docs", "skill://weather/SKILL.md")
        .await
        .expect_err("skills refused");
    assert_eq!(skill.kind(), FailureKind::NotAdvertised);
    runtime.shutdown().await;
}

#[tokio::test]
async fn prompts_validate_required_arguments_first() {
    let test = common::runtime(vec![common::fixture("docs", "echo")]);
    let runtime = &test.runtime;
    let prompts = runtime.prompts("docs").await.expect("prompts");
    assert!(prompts.iter().any(|prompt| prompt.name == "greet"));

    let missing = runtime
        .get_prompt("docs", "greet", BTreeMap::new())
        .await
        .expect_err("name is required");
    assert_eq!(missing.kind(), FailureKind::InvalidArguments);
    assert!(
        missing.to_string().contains("needs the argument(s) name"),
        "{missing}"
    );

    let mut arguments = BTreeMap::new();
    arguments.insert("name".to_owned(), "Ada".to_owned());
    let prompt = runtime
        .get_prompt("docs", "greet", arguments)
        .await
        .expect("greet");
    let text = serde_json::to_string(&prompt.messages).expect("json");
    assert!(text.contains("Ada"), "{text}");
    runtime.shutdown().await;
}
