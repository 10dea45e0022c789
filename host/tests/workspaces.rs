//! MCP workspaces on real directories (DESIGN §12, issue 14 item 2): roots from the config and
//! the mappings, `workspace_open` and its refusals (sibling prefixes, symbolic links out, files,
//! `/`), handles that survive a restart and are checked again against the roots configured
//! then, read-only roots, and paths inside a workspace.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use review_agent_gateway::config::{Config, Mapping, McpConfig, McpRoot};
use review_agent_gateway::error::codes;
use review_agent_gateway::store::Store;
use review_agent_gateway::transport::http::status_for;
use review_agent_gateway::workspace::{Os, RootSource, Roots, Workspaces};

// === Helpers ===

/// A temporary tree: `allowed/` (a root), `allowed_evil/` beside it, `outside/`, and the store.
struct Dir {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Dir {
    fn new() -> Dir {
        let tmp = tempfile::tempdir().expect("temp dir");
        let base = std::fs::canonicalize(tmp.path()).expect("canonical temp dir");
        for dir in ["allowed/proj/src", "allowed_evil", "outside", "state"] {
            std::fs::create_dir_all(base.join(dir)).expect("mkdir");
        }
        std::fs::write(base.join("allowed/proj/src/main.rs"), "fn main() {}\n").expect("write");
        std::fs::write(base.join("outside/secret"), "secret\n").expect("write");
        Dir { _tmp: tmp, base }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    fn store(&self) -> Arc<Store> {
        Arc::new(Store::open(&self.path("state/gateway.redb")).expect("store opens"))
    }

    /// A config with these `[mcp] roots` (relative to the base) and mappings' local paths.
    fn config(&self, roots: &[(&str, bool)], mappings: &[&str]) -> Config {
        Config {
            mcp: McpConfig {
                roots: roots
                    .iter()
                    .map(|(rel, writable)| McpRoot {
                        path: self.path(rel),
                        writable: *writable,
                    })
                    .collect(),
                ..McpConfig::default()
            },
            mappings: mappings
                .iter()
                .enumerate()
                .map(|(i, rel)| Mapping {
                    gitlab_origin: "https://gitlab.example.com".into(),
                    project_path: format!("group/p{i}"),
                    local_path: self.path(rel),
                    default_ref: "main".into(),
                })
                .collect(),
            ..Config::default()
        }
    }

    fn workspaces(&self, roots: &[(&str, bool)]) -> Workspaces {
        Workspaces::new(self.store(), Roots::from_config(&self.config(roots, &[])))
    }
}

/// The error code of a result.
fn code<T: std::fmt::Debug>(result: Result<T, review_agent_gateway::GatewayError>) -> &'static str {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(error) => {
            assert!(!error.remediation.is_empty(), "{error:?}");
            error.code
        }
    }
}

// === workspace_open ===

#[test]
fn a_directory_inside_a_root_opens_and_others_are_refused() {
    let dir = Dir::new();
    let ws = dir.workspaces(&[("allowed", false)]);

    let opened = ws.open(&dir.path("allowed/proj")).expect("inside");
    assert_eq!(opened.dir(), dir.path("allowed/proj"));
    assert!(!opened.writable());
    let handle = opened.handle();
    assert!(handle.starts_with("ws_") && handle.len() == 35, "{handle}");
    // The root itself is a workspace; `..` and `.` are resolved before the check.
    ws.open(&dir.path("allowed")).expect("the root");
    let through_dots = ws
        .open(&dir.path("allowed/proj/src/../."))
        .expect("through ..");
    assert_eq!(
        through_dots.handle(),
        handle,
        "the same directory, the same handle"
    );

    for (path, expect) in [
        (dir.path("allowed_evil"), codes::WORKSPACE_OUTSIDE_ROOTS),
        (dir.path("outside"), codes::WORKSPACE_OUTSIDE_ROOTS),
        (
            dir.path("allowed/../outside"),
            codes::WORKSPACE_OUTSIDE_ROOTS,
        ),
        (dir.base.clone(), codes::WORKSPACE_OUTSIDE_ROOTS),
        (PathBuf::from("/etc"), codes::WORKSPACE_OUTSIDE_ROOTS),
        (PathBuf::from("/"), codes::WORKSPACE_FILESYSTEM_ROOT),
        (
            dir.path("allowed/proj/src/main.rs"),
            codes::WORKSPACE_NOT_A_DIRECTORY,
        ),
        (dir.path("allowed/missing"), codes::WORKSPACE_NOT_FOUND),
        // A missing path outside the roots says nothing of what exists there.
        (dir.path("outside/missing"), codes::WORKSPACE_OUTSIDE_ROOTS),
        (dir.path("outside/secret"), codes::WORKSPACE_OUTSIDE_ROOTS),
        (PathBuf::from("allowed"), codes::REQUEST_INVALID),
    ] {
        assert_eq!(code(ws.open(&path)), expect, "{}", path.display());
    }
}

#[test]
fn symbolic_links_are_judged_by_their_target() {
    let dir = Dir::new();
    symlink("/etc", dir.path("allowed/etc")).expect("link");
    symlink(dir.path("outside"), dir.path("allowed/out")).expect("link");
    symlink(dir.path("allowed/proj/src"), dir.path("allowed/src-link")).expect("link");
    symlink("/", dir.path("allowed/slash")).expect("link");
    std::fs::create_dir_all(dir.path("allowed/proj/.git/hooks")).expect("mkdir");
    let ws = dir.workspaces(&[("allowed", true)]);

    assert_eq!(
        code(ws.open(&dir.path("allowed/etc"))),
        codes::WORKSPACE_OUTSIDE_ROOTS
    );
    assert_eq!(
        code(ws.open(&dir.path("allowed/out"))),
        codes::WORKSPACE_OUTSIDE_ROOTS
    );
    assert_eq!(
        code(ws.open(&dir.path("allowed/slash"))),
        codes::WORKSPACE_FILESYSTEM_ROOT
    );
    assert_eq!(
        code(ws.open(&dir.path("allowed/proj/.git/hooks"))),
        codes::WORKSPACE_INSIDE_GIT_DIR
    );
    // A link that stays inside opens its target.
    let opened = ws.open(&dir.path("allowed/src-link")).expect("inside");
    assert_eq!(opened.dir(), dir.path("allowed/proj/src"));
}

#[test]
fn a_root_that_is_a_link_is_its_target() {
    let dir = Dir::new();
    symlink(dir.path("allowed"), dir.path("root-link")).expect("link");
    let ws = dir.workspaces(&[("root-link", false)]);
    assert_eq!(ws.roots().roots()[0].path(), dir.path("allowed"));
    ws.open(&dir.path("allowed/proj"))
        .expect("by the target's path");
    ws.open(&dir.path("root-link/proj"))
        .expect("by the link's path");
}

#[test]
fn no_roots_refuses_everything() {
    let dir = Dir::new();
    let ws = dir.workspaces(&[]);
    for path in ["allowed", "allowed/proj", "outside"] {
        assert_eq!(
            code(ws.open(&dir.path(path))),
            codes::WORKSPACE_OUTSIDE_ROOTS
        );
    }
    drop(ws); // One store writer at a time.
    // A root that does not exist is left out, not an error.
    let ws = dir.workspaces(&[("missing", true)]);
    assert!(ws.roots().roots().is_empty());
}

// === Handles ===

#[test]
fn handles_survive_a_restart_and_follow_the_roots_of_now() {
    let dir = Dir::new();
    let handle = {
        let ws = dir.workspaces(&[("allowed", true)]);
        let opened = ws.open(&dir.path("allowed/proj")).expect("opens");
        assert!(opened.writable());
        opened.handle().to_owned()
    }; // The store is closed here, as at a daemon's exit.

    // Restarted with the same roots: the same workspace.
    {
        let ws = dir.workspaces(&[("allowed", true)]);
        let got = ws.get(&handle).expect("persisted");
        assert_eq!(got.dir(), dir.path("allowed/proj"));
        assert!(got.writable());
    }
    // Restarted with the root made read-only: readable, not writable.
    {
        let ws = dir.workspaces(&[("allowed", false)]);
        let got = ws.get(&handle).expect("still inside");
        assert!(!got.writable());
        assert_eq!(code(got.require_writable()), codes::WORKSPACE_READ_ONLY);
    }
    // Restarted with the root removed from the config: refused.
    {
        let ws = dir.workspaces(&[("outside", true)]);
        assert_eq!(code(ws.get(&handle)), codes::WORKSPACE_OUTSIDE_ROOTS);
        // A config reload that brings it back.
        ws.set_roots(Roots::from_config(&dir.config(&[("allowed", false)], &[])));
        ws.get(&handle).expect("allowed again");
    }
}

#[test]
fn a_handle_is_checked_again_on_every_use() {
    let dir = Dir::new();
    std::fs::create_dir_all(dir.path("allowed/gone")).expect("mkdir");
    std::fs::create_dir_all(dir.path("allowed/swapped")).expect("mkdir");
    let ws = dir.workspaces(&[("allowed", true)]);
    let gone = ws.open(&dir.path("allowed/gone")).expect("opens");
    let swapped = ws.open(&dir.path("allowed/swapped")).expect("opens");

    std::fs::remove_dir(dir.path("allowed/gone")).expect("rmdir");
    assert_eq!(code(ws.get(gone.handle())), codes::WORKSPACE_NOT_FOUND);

    // Replaced by a link to a directory outside: the handle does not follow it.
    std::fs::remove_dir(dir.path("allowed/swapped")).expect("rmdir");
    symlink(dir.path("outside"), dir.path("allowed/swapped")).expect("link");
    assert_eq!(code(ws.get(swapped.handle())), codes::WORKSPACE_NOT_FOUND);
    assert_eq!(
        code(ws.resolve(swapped.handle(), "secret")),
        codes::WORKSPACE_NOT_FOUND
    );

    // Replaced by a file.
    std::fs::remove_file(dir.path("allowed/swapped")).expect("rm");
    std::fs::write(dir.path("allowed/swapped"), "").expect("write");
    assert_eq!(code(ws.get(swapped.handle())), codes::WORKSPACE_NOT_FOUND);
}

#[test]
fn unknown_handles() {
    let dir = Dir::new();
    let ws = dir.workspaces(&[("allowed", true)]);
    ws.open(&dir.path("allowed/proj")).expect("opens");
    for handle in [
        "ws_00000000000000000000000000000000",
        "ws_",
        "",
        "ws_../../etc",
        "allowed/proj",
    ] {
        assert_eq!(code(ws.get(handle)), codes::WORKSPACE_UNKNOWN, "{handle:?}");
    }
}

// === Read-only roots and mappings ===

#[test]
fn a_read_only_root_refuses_writes() {
    let dir = Dir::new();
    let ws = dir.workspaces(&[("allowed", false)]);
    let handle = ws
        .open(&dir.path("allowed/proj"))
        .expect("opens")
        .handle()
        .to_owned();
    let got = ws.get(&handle).expect("get");
    assert_eq!(code(got.require_writable()), codes::WORKSPACE_READ_ONLY);
    assert_eq!(
        code(ws.resolve_for_write(&handle, "src/new.rs")),
        codes::WORKSPACE_READ_ONLY
    );
    // Reading is fine.
    assert_eq!(
        ws.resolve(&handle, "src/main.rs").expect("read"),
        dir.path("allowed/proj/src/main.rs")
    );
}

#[test]
fn mappings_are_read_only_roots() {
    let dir = Dir::new();
    let config = dir.config(&[], &["allowed/proj"]);
    let roots = Roots::from_config(&config);
    assert_eq!(roots.roots().len(), 1);
    assert_eq!(roots.roots()[0].source(), RootSource::Mapping);
    assert!(!roots.roots()[0].writable());
    let ws = Workspaces::new(dir.store(), roots);

    let opened = ws
        .open(&dir.path("allowed/proj/src"))
        .expect("inside the mapping");
    assert!(!opened.writable());
    assert_eq!(code(opened.require_writable()), codes::WORKSPACE_READ_ONLY);
    assert_eq!(
        code(ws.open(&dir.path("allowed"))),
        codes::WORKSPACE_OUTSIDE_ROOTS
    );

    // Roots grant, never restrict: a writable root that holds the mapping makes it writable.
    ws.set_roots(Roots::from_config(
        &dir.config(&[("allowed", true)], &["allowed/proj"]),
    ));
    assert!(ws.get(opened.handle()).expect("get").writable());
}

// === Paths inside a workspace ===

#[test]
fn paths_inside_a_workspace_follow_the_tool_rules() {
    let dir = Dir::new();
    std::fs::create_dir_all(dir.path("allowed/proj/.git")).expect("mkdir");
    std::fs::write(dir.path("allowed/proj/.git/config"), "").expect("write");
    symlink("/etc/passwd", dir.path("allowed/proj/passwd")).expect("link");
    symlink("../../outside", dir.path("allowed/proj/out")).expect("link");
    symlink("src/main.rs", dir.path("allowed/proj/main-link")).expect("link");
    symlink("/nonexistent/x", dir.path("allowed/proj/dangling")).expect("link");
    let ws = dir.workspaces(&[("allowed", true)]);
    let handle = ws
        .open(&dir.path("allowed/proj"))
        .expect("opens")
        .handle()
        .to_owned();

    assert_eq!(
        ws.resolve(&handle, "src/main.rs").expect("a file"),
        dir.path("allowed/proj/src/main.rs")
    );
    assert_eq!(
        ws.resolve(&handle, "./src//../src/main.rs")
            .expect("normalized"),
        dir.path("allowed/proj/src/main.rs")
    );
    assert_eq!(
        ws.resolve(&handle, "main-link").expect("a link inside"),
        dir.path("allowed/proj/src/main.rs")
    );
    assert_eq!(
        ws.resolve(&handle, "").expect("the directory"),
        dir.path("allowed/proj")
    );
    for (rel, expect) in [
        ("../allowed_evil", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("src/../../x", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("/etc/passwd", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("passwd", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("out/secret", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("dangling", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        (".git/config", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("src\\main.rs", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("src/main.rs\0", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("src/missing.rs", codes::TOOL_PATH_NOT_FOUND),
    ] {
        assert_eq!(code(ws.resolve(&handle, rel)), expect, "{rel:?}");
    }

    // Writes: a new file in an existing directory; never through a link, into `.git`, a
    // directory, or a missing directory.
    assert_eq!(
        ws.resolve_for_write(&handle, "src/new.rs")
            .expect("a new file"),
        dir.path("allowed/proj/src/new.rs")
    );
    assert_eq!(
        ws.resolve_for_write(&handle, "src/main.rs")
            .expect("an existing file"),
        dir.path("allowed/proj/src/main.rs")
    );
    for (rel, expect) in [
        ("main-link", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("passwd", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("out/new", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        (".git/hooks/pre-commit", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("src/.git/x", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("../allowed_evil/x", codes::TOOL_PATH_OUTSIDE_REPOSITORY),
        ("src", codes::REQUEST_INVALID),
        ("", codes::REQUEST_INVALID),
        ("src/main.rs/x", codes::REQUEST_INVALID),
        ("nodir/x", codes::TOOL_PATH_NOT_FOUND),
    ] {
        assert_eq!(code(ws.resolve_for_write(&handle, rel)), expect, "{rel:?}");
    }
}

// === Config and statuses ===

#[test]
fn the_mcp_section_is_checked() {
    let path = Path::new("config.toml");
    let config = Config::parse(
        "[mcp]\nroots = [{ path = \"/home/me/src\" }, { path = \"/srv/scratch\", writable = true }]\n",
        path,
    )
    .expect("parses");
    assert_eq!(
        config.mcp.roots,
        [
            McpRoot {
                path: "/home/me/src".into(),
                writable: false
            },
            McpRoot {
                path: "/srv/scratch".into(),
                writable: true
            },
        ]
    );
    assert!(Config::parse("", path).expect("empty").mcp.roots.is_empty());
    for (text, key) in [
        ("[mcp]\nroots = [{ path = \"src\" }]\n", "mcp.roots[0].path"),
        ("[mcp]\nroots = [{ path = \"/\" }]\n", "mcp.roots[0].path"),
        (
            "[mcp]\nroots = [{ path = \"/a\", write = true }]\n",
            "mcp.roots[0]",
        ),
        ("[mcp]\nroot = []\n", "mcp"),
    ] {
        let error = Config::parse(text, path).expect_err(text).to_string();
        assert!(error.contains(key), "{text:?}: {error}");
    }
    let remediation = review_agent_gateway::GatewayError::from(
        Config::parse("[mcp]\nroots = 1\n", path).expect_err("type"),
    )
    .remediation;
    assert!(remediation.contains("[mcp]"), "{remediation}");
}

#[test]
fn statuses() {
    for (code, status) in [
        (codes::WORKSPACE_OUTSIDE_ROOTS, 403),
        (codes::WORKSPACE_FILESYSTEM_ROOT, 403),
        (codes::WORKSPACE_INSIDE_GIT_DIR, 403),
        (codes::WORKSPACE_READ_ONLY, 403),
        (codes::WORKSPACE_NOT_FOUND, 404),
        (codes::WORKSPACE_UNKNOWN, 404),
        (codes::WORKSPACE_NOT_A_DIRECTORY, 400),
    ] {
        assert_eq!(status_for(code).as_u16(), status, "{code}");
    }
}

#[test]
fn the_platform_is_this_one() {
    let dir = Dir::new();
    assert_eq!(dir.workspaces(&[]).roots().platform(), Os::current());
}

#[test]
fn the_gateways_own_directories_are_never_a_workspace() {
    let dir = Dir::new();
    std::fs::create_dir_all(dir.path("allowed/gateway/config")).expect("mkdir");
    std::fs::create_dir_all(dir.path("allowed/gateway/state")).expect("mkdir");
    let ws = dir.workspaces(&[("allowed", true)]).with_private(&[
        dir.path("allowed/gateway/config"),
        dir.path("allowed/gateway/state"),
    ]);
    // The root holds the gateway's data: refused, and so is anything inside it.
    for inside in [
        "allowed",
        "allowed/gateway",
        "allowed/gateway/config",
        "allowed/gateway/state",
    ] {
        assert_eq!(
            code(ws.open(&dir.path(inside))),
            codes::WORKSPACE_GATEWAY_DATA,
            "{inside}"
        );
    }
    assert_eq!(status_for(codes::WORKSPACE_GATEWAY_DATA).as_u16(), 403);
    // A project beside it opens.
    let proj = ws.open(&dir.path("allowed/proj")).expect("a project opens");
    assert!(proj.writable());
    // A link inside a project pointing at the gateway's data is refused too.
    std::os::unix::fs::symlink(dir.path("allowed/gateway"), dir.path("allowed/proj/gw"))
        .expect("link");
    assert_eq!(
        code(ws.open(&dir.path("allowed/proj/gw"))),
        codes::WORKSPACE_GATEWAY_DATA
    );
}
