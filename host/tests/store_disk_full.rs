//! Disk full must not poison the store (issue 12 §2), replayed with the real binary on a real
//! port: the state dir is a 2 MiB tmpfs, filled with a file while a review streams, then freed.
//!
//! Before the fix the first failed write turned every later store call, reads of earlier runs
//! included, into 503 "Previous I/O error occurred. Please close and re-open the database."
//! until a restart, `/v1/health` said nothing, and the streaming review stalled with no
//! terminal event.
//!
//! Mounting needs root (CI runs as root). Elsewhere the test says so and passes without
//! running; with `REVIEW_AGENT_GATEWAY_TEST_REQUIRE_MOUNT=1` (set by `.ci/run`) a failed mount
//! fails it instead.
#![cfg(target_os = "linux")]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::http::{self, SseStream};
use common::{read_port, token};
use serde_json::{Value, json};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";

/// A tmpfs mounted on a directory; unmounted (lazily, so a file still open cannot keep it)
/// when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `2m`) with mode 0700 on `dir`; `Err` with `mount`'s
    /// message when it is not permitted.
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).expect("mount point");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if out.status.success() {
            Ok(Tmpfs(dir.to_owned()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

struct Daemon {
    child: Child,
    port: u16,
    token: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn authed(&self, method: &str, path: &str, body: Option<&Value>) -> http::Response {
        let auth = format!("Bearer {}", self.token);
        http::request(self.port, method, path, &[("Authorization", &auth)], body)
    }

    fn health_store(&self) -> Value {
        let health = http::request(self.port, "GET", "/v1/health", &[], None);
        assert_eq!(health.status, 200, "{}", health.body);
        health.json()["data"]["store"].clone()
    }
}

/// A repository whose head adds `n` lines the built-in rules flag.
fn repository(n: usize) -> (tempfile::TempDir, String, String) {
    let lines: String = (0..n).map(|i| format!("v{i} = eval(x{i})\n")).collect();
    common::app_repository("import os\n", &format!("import os\n{lines}"))
}

fn review_body(request_id: &str, base: &str, head: &str) -> Value {
    json!({
        "requestId": request_id,
        "mode": "merge-request",
        "target": {
            "gitlabOrigin": ORIGIN,
            "projectPath": PROJECT,
            "mergeRequestIid": 1,
            "diffRefs": { "baseSha": base, "startSha": base, "headSha": head }
        },
        "scope": { "filePaths": null, "selection": null },
        "policy": { "minConfidence": "low" }
    })
}

/// Writes zeros to `path` until the filesystem is full; returns how many bytes it took.
fn fill(path: &Path) -> u64 {
    let mut file = std::fs::File::create(path).expect("create the filler");
    let chunk = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling the tmpfs: {e}"),
        }
    }
    // Small writes fill the last partial page too.
    while file.write(&[0u8; 512]).is_ok_and(|n| n > 0) {
        written += 512;
    }
    written
}

fn last(events: &[http::SseEvent]) -> (&str, &Value) {
    let event = events.last().expect("at least one event");
    (event.1.as_str(), &event.2)
}

#[test]
fn a_full_disk_fails_the_streaming_run_then_the_store_recovers_without_a_restart() {
    let home = tempfile::tempdir().expect("temp dir");
    let state = home.path().join("state");
    let _tmpfs = match Tmpfs::mount(&state, "2m") {
        Ok(mounted) => mounted,
        Err(why) if std::env::var_os("REVIEW_AGENT_GATEWAY_TEST_REQUIRE_MOUNT").is_none() => {
            eprintln!(
                "SKIPPED a_full_disk_fails_the_streaming_run_then_the_store_recovers_without_a_restart: \
                 cannot mount a tmpfs ({why}); run as root to replay the full disk"
            );
            return;
        }
        Err(why) => panic!("cannot mount a tmpfs: {why}"),
    };
    let (repo, base, head) = repository(40);
    std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
    std::fs::write(
        home.path().join("config/config.toml"),
        format!(
            "allowed_origins = [\"{ORIGIN}\"]\n\n[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\n\
             project_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n",
            repo.path().display()
        ),
    )
    .expect("config");
    // Each finding committed on its own, 150 ms apart: the disk fills mid-review.
    let mut child = http::spawn_serve(
        home.path(),
        &[("REVIEW_AGENT_GATEWAY_FAULT_FINDING_DELAY_MS", "150")],
    );
    let port = read_port(&mut child);
    let d = Daemon {
        child,
        port,
        token: token(home.path()),
    };
    assert_eq!(d.health_store()["status"], "ok");

    // An earlier run, complete.
    let earlier = d
        .authed(
            "POST",
            "/v1/reviews",
            Some(&review_body("before", &base, &head)),
        )
        .sse();
    assert_eq!(last(&earlier).0, "run.completed");
    let earlier_id = earlier[0].2["runId"].as_str().expect("runId").to_owned();

    // A review streaming when the disk fills up.
    let auth = format!("Bearer {}", d.token);
    let mut other = review_body("during", &base, &head);
    other["policy"]["minConfidence"] = json!("medium"); // not the cached review
    let mut stream = SseStream::open(
        d.port,
        "POST",
        "/v1/reviews",
        &[("Authorization", &auth)],
        Some(&other),
    );
    let mut seen = Vec::new();
    while let Some(event) = stream.next_event() {
        let finding = event.1 == "finding.created";
        seen.push(event);
        if finding {
            break;
        }
    }
    let run_id = seen[0].2["runId"].as_str().expect("runId").to_owned();
    let filler = state.join("filler");
    let filled = fill(&filler);
    assert!(filled > 0, "the tmpfs had room to fill");
    let deadline = Instant::now() + Duration::from_secs(60);
    seen.extend(std::iter::from_fn(|| {
        assert!(Instant::now() < deadline, "the stream did not end");
        stream.next_event()
    }));
    let (kind, data) = last(&seen);
    assert_eq!(
        kind, "run.failed",
        "the stream ends with run.failed: {seen:?}"
    );
    assert_eq!(data["error"]["code"], "store.unavailable", "{data}");
    assert_eq!(data["error"]["retryable"], true, "{data}");
    let remediation = data["error"]["remediation"].as_str().unwrap_or_default();
    assert!(
        remediation.contains(&state.display().to_string()) && remediation.contains("no restart"),
        "the remediation names the state dir and says no restart is needed: {remediation}"
    );
    assert!(
        seen.iter().filter(|e| e.1 == "finding.created").count() < 40,
        "the run failed before its end"
    );
    let seqs: Vec<u64> = seen.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (1..=seen.len() as u64).collect::<Vec<_>>(),
        "gap-free"
    );

    // While the disk is full: earlier runs stay readable, health says the store is
    // unavailable and why, a new review is refused with the same clear 503.
    let view = d.authed("GET", &format!("/v1/runs/{earlier_id}"), None);
    assert_eq!(
        view.status, 200,
        "an earlier run stays readable: {}",
        view.body
    );
    assert_eq!(view.json()["data"]["state"], "completed");
    let replay = d
        .authed(
            "GET",
            &format!("/v1/runs/{earlier_id}/events?after=0"),
            None,
        )
        .sse();
    assert_eq!(replay.len(), earlier.len(), "its events too");
    let failed = d.authed("GET", &format!("/v1/runs/{run_id}"), None).json();
    assert_eq!(failed["data"]["state"], "failed", "{failed}");
    let log = || std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default();
    let store = d.health_store();
    assert_eq!(store["status"], "unavailable", "{store}\n{}", log());
    assert_eq!(store["error"]["code"], "store.unavailable", "{store}");
    assert!(store["since"].is_string(), "{store}");
    let refused = d.authed(
        "POST",
        "/v1/reviews",
        Some(&review_body("full", &base, &head)),
    );
    assert_eq!(
        (refused.status, refused.error_code().as_str()),
        (503, "store.unavailable"),
        "{}",
        refused.body
    );
    assert!(
        !refused.body.contains("Previous I/O error"),
        "no redb internals: {}",
        refused.body
    );
    // Following the failed run again ends with the same run.failed (kept in memory).
    let again = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    assert_eq!(
        again.last().map(|e| (e.0, e.1.as_str())),
        seen.last().map(|e| (e.0, e.1.as_str()))
    );

    // Space is freed: the store recovers by itself, no restart.
    std::fs::remove_file(&filler).expect("free the space");
    let store = d.health_store();
    assert_eq!(store["status"], "ok", "{store}");
    let stored = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    assert_eq!(
        stored.last().map(|e| (e.0, e.1.as_str())),
        seen.last().map(|e| (e.0, e.1.as_str())),
        "the run.failed is in the log now"
    );
    let fresh = d
        .authed(
            "POST",
            "/v1/reviews",
            Some(&review_body("after", &base, &head)),
        )
        .sse();
    assert_eq!(last(&fresh).0, "run.completed", "{fresh:?}");
    // The failed run resumes to its end, each finding once.
    let resumed = d.authed("POST", &format!("/v1/runs/{run_id}/resume"), None);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let all = d
        .authed("GET", &format!("/v1/runs/{run_id}/events?after=0"), None)
        .sse();
    assert_eq!(last(&all).0, "run.completed");
    let mut fingerprints: Vec<&str> = all
        .iter()
        .filter(|e| e.1 == "finding.created")
        .filter_map(|e| e.2["finding"]["fingerprint"].as_str())
        .collect();
    fingerprints.sort_unstable();
    let n = fingerprints.len();
    fingerprints.dedup();
    assert_eq!((n, fingerprints.len()), (40, 40), "each finding once");
    drop(d);
}
