//! `tool.started` / `tool.completed` (issue 4, draft §10 "Tool Event Redaction"): a real tool
//! call on a real repository that holds secrets; the events carry a redacted input summary and
//! an `outputPreview` of at most 2000 characters with tokens, key blocks and the repository's
//! absolute path removed, while the caller still gets the tool's full answer.

#[path = "e2e/support.rs"]
mod support;

use review_agent_gateway::error::codes;
use review_agent_gateway::tools::{OUTPUT_PREVIEW_CHARS, Registry, ToolContext, invoke};
use serde_json::json;
use support::TestRepo;

const GITHUB_TOKEN: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
const KEY_BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7";

fn repo_with_secrets() -> TestRepo {
    let mut repo = TestRepo::new();
    let config = format!(
        "token = \"{GITHUB_TOKEN}\"\n\
         -----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n\
         cache_dir = \"{}/cache\"\n",
        repo.path_str()
    );
    repo.write_all(&[("deploy/settings.txt", config.as_str())]);
    repo.write("big.txt", "line of filler text\n".repeat(5000));
    repo.commit("secrets");
    repo
}

#[test]
fn events_are_redacted_and_the_caller_gets_everything() {
    let repo = repo_with_secrets();
    let ctx = ToolContext::open(repo.path(), None).expect("open");
    let registry = Registry::builtin();
    let tool = registry.get("file_read").expect("file_read");
    let call = invoke(
        tool,
        &ctx,
        "call_1",
        json!({ "path": "deploy/settings.txt", "startLine": 1, "endLine": 10 }),
    );
    let output = call.result.expect("file_read answers");
    let text = output.value["text"].as_str().expect("text");
    assert!(text.contains(GITHUB_TOKEN), "the model gets the real file");

    assert_eq!(call.started.call_id, "call_1");
    assert_eq!(call.started.tool, "file_read");
    assert_eq!(
        call.started.input,
        json!({ "path": "deploy/settings.txt", "startLine": 1, "endLine": 10 })
    );
    let done = &call.completed;
    assert!(done.ok);
    assert_eq!(done.call_id, "call_1");
    assert!(done.duration_ms.is_some());
    let preview = done.output_preview.as_deref().expect("preview");
    assert!(!preview.contains(GITHUB_TOKEN), "{preview}");
    assert!(!preview.contains(KEY_BODY), "{preview}");
    assert!(!preview.contains(repo.path_str()), "{preview}");
    assert!(preview.contains("<repo>/cache"), "{preview}");
    assert!(preview.contains("deploy/settings.txt"), "{preview}");
    let event = serde_json::to_string(&call.completed).expect("serialize");
    assert!(!event.contains(GITHUB_TOKEN));
}

#[test]
fn long_outputs_are_cut_and_say_so() {
    let repo = repo_with_secrets();
    let ctx = ToolContext::open(repo.path(), None).expect("open");
    let registry = Registry::builtin();
    let call = invoke(
        registry.get("file_read").expect("file_read"),
        &ctx,
        "call_2",
        json!({ "path": "big.txt" }),
    );
    let output = call.result.expect("answers");
    assert_eq!(output.value["totalLines"], 5000);
    assert!(!output.truncated, "the tool itself returned everything");
    let preview = call.completed.output_preview.expect("preview");
    assert_eq!(preview.chars().count(), OUTPUT_PREVIEW_CHARS);
    assert!(preview.ends_with('…'));
    assert_eq!(call.completed.truncated, Some(true));
}

#[test]
fn failures_carry_a_redacted_error_and_no_preview() {
    let repo = repo_with_secrets();
    let ctx = ToolContext::open(repo.path(), None).expect("open");
    let registry = Registry::builtin();
    let query = format!("needle {GITHUB_TOKEN}");
    let call = invoke(
        registry.get("file_read").expect("file_read"),
        &ctx,
        "call_3",
        json!({ "path": format!("{}/deploy/settings.txt", repo.path_str()), "q": query }),
    );
    let error = call
        .result
        .expect_err("absolute paths and unknown fields are refused");
    assert_eq!(error.code, codes::REQUEST_INVALID);
    let started = serde_json::to_string(&call.started).expect("serialize");
    assert!(!started.contains(GITHUB_TOKEN), "{started}");
    assert!(!started.contains(repo.path_str()), "{started}");
    let done = &call.completed;
    assert!(!done.ok);
    assert!(done.output_preview.is_none());
    let object = done.error.as_ref().expect("error object");
    assert_eq!(object.code, codes::REQUEST_INVALID);
    assert!(
        !object.message.contains(repo.path_str()),
        "{}",
        object.message
    );

    let outside = invoke(
        registry.get("file_read").expect("file_read"),
        &ctx,
        "call_4",
        json!({ "path": format!("{}/deploy/settings.txt", repo.path_str()) }),
    );
    let object = outside.completed.error.expect("error object");
    assert_eq!(object.code, codes::TOOL_PATH_OUTSIDE_REPOSITORY);
    assert!(
        !object.message.contains(repo.path_str()),
        "{}",
        object.message
    );
}
