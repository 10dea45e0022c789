//! The configuration file (issue 3 part 2): a full example, defaults, every kind of invalid file
//! naming its key and line, and mapping edits that keep the user's comments.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{self, Config, ConfigError, Limits, Mapping, ProviderKind};

const FULL: &str = r#"# my gateway
port = 4400
bind = "127.0.0.1"
allowed_origins = ["HTTPS://GitLab.com:443", "http://gitlab.local:8080"]
rules_dirs = ["/opt/rules", "team-rules"]
event_retention_hours = 48

[limits]
max_context_tokens = 100000
max_concurrent_reviews = 4
max_tool_calls_per_run = 30

# work
[[mappings]]
gitlab_origin = "https://gitlab.example.com"
project_path = "/group/sub/project/"
local_path = "/home/me/src/project"

[[mappings]]
gitlab_origin = "https://gitlab.example.com"
project_path = "group/other"
local_path = "/home/me/src/other"
default_ref = "develop"

[[providers]]
id = "local-openai"
kind = "openai-compatible"
base_url = "http://127.0.0.1:11434/v1"
model = "qwen2.5-coder:14b"
context_window = 32768

[[providers]]
id = "claude"
kind = "anthropic"
base_url = "https://api.anthropic.com"
"#;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/etc/gw/config.toml"))
}

#[test]
fn full_example() {
    let config = parse(FULL).expect("valid");
    assert_eq!(config.port, 4400);
    assert_eq!(config.bind, IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!(
        config.allowed_origins,
        ["https://gitlab.com", "http://gitlab.local:8080"]
    );
    assert_eq!(
        config.rules_dirs,
        [
            PathBuf::from("/opt/rules"),
            PathBuf::from("/etc/gw/team-rules")
        ]
    );
    assert_eq!(config.event_retention_hours, 48);
    assert_eq!(
        config.limits,
        Limits {
            max_context_tokens: 100_000,
            max_concurrent_reviews: 4,
            max_tool_calls_per_run: 30
        }
    );
    assert_eq!(
        config.mappings[0],
        Mapping {
            gitlab_origin: "https://gitlab.example.com".into(),
            project_path: "group/sub/project".into(),
            local_path: "/home/me/src/project".into(),
            default_ref: "main".into(),
        }
    );
    assert_eq!(config.mappings[1].default_ref, "develop");
    assert_eq!(config.providers.len(), 2);
    assert_eq!(config.providers[0].kind, ProviderKind::OpenaiCompatible);
    assert_eq!(
        config.providers[0].model.as_deref(),
        Some("qwen2.5-coder:14b")
    );
    assert_eq!(config.providers[0].context_window, Some(32768));
    assert_eq!(config.providers[1].kind.as_str(), "anthropic");
    assert_eq!(config.providers[1].model, None);

    let limits: review_agent_gateway::protocol::Limits = config.limits.into();
    assert_eq!(limits.max_concurrent_reviews, 4);
}

#[test]
fn defaults() {
    for text in ["", "# nothing but a comment\n"] {
        let config = parse(text).expect("valid");
        assert_eq!(config, Config::default());
    }
    let config = Config::default();
    assert_eq!(config.port, 4317);
    assert_eq!(config.bind.to_string(), "127.0.0.1");
    assert!(config.allowed_origins.is_empty() && config.mappings.is_empty());
    assert!(config.providers.is_empty() && config.rules_dirs.is_empty());
    assert_eq!(config.limits.max_context_tokens, 200_000);
    assert_eq!(config.limits.max_concurrent_reviews, 2);
    assert_eq!(config.limits.max_tool_calls_per_run, 60);
    assert_eq!(config.event_retention_hours, 24);
    // A partial [limits] keeps the other defaults.
    let config = parse("[limits]\nmax_concurrent_reviews = 1\n").expect("valid");
    assert_eq!(config.limits.max_concurrent_reviews, 1);
    assert_eq!(config.limits.max_tool_calls_per_run, 60);
}

/// Parse `text`; expect an error naming `key` (None: none) at `line`, with `fragment` in the
/// message, and `config.invalid` as its code.
fn check_invalid(text: &str, key: Option<&str>, line: usize, fragment: &str) {
    let err = parse(text).expect_err("invalid");
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("/etc/gw/config.toml:{line}: ")),
        "{shown}"
    );
    if let Some(key) = key {
        assert!(shown.contains(&format!("`{key}`")), "{shown}");
    }
    assert!(shown.contains(fragment), "`{shown}` lacks `{fragment}`");
    match &err {
        ConfigError::Invalid {
            key: k, line: l, ..
        } => {
            assert_eq!(k.as_deref(), key, "{shown}");
            assert_eq!(*l, line, "{shown}");
        }
        ConfigError::SecretInConfig {
            key: k, line: l, ..
        } => {
            assert_eq!(Some(k.as_str()), key, "{shown}");
            assert_eq!(*l, line, "{shown}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let gateway = GatewayError::from(err);
    assert_eq!(gateway.code, "config.invalid");
    assert!(!gateway.remediation.is_empty());
}

#[test]
fn unknown_keys() {
    check_invalid("port = 1\nprot = 4317\n", Some("prot"), 2, "unknown field");
    check_invalid(
        "\n[limits]\nmax_concurrent_reviews = 2\nmax_reviews = 3\n",
        Some("limits.max_reviews"),
        4,
        "unknown field",
    );
    check_invalid(
        "[[mappings]]\ngitlab_origin = \"https://g.example\"\nproject_path = \"a/b\"\nlocal_path = \"/x\"\nbranch = \"main\"\n",
        Some("mappings[0].branch"),
        5,
        "unknown field",
    );
}

/// Issue 12 §5: a top-level key written after a table header is read by TOML as part of that
/// table; the error says so and names the header's line.
#[test]
fn a_top_level_key_below_a_table_is_named_as_such() {
    let text = "allowed_origins = [\"https://g.example\"]\n\n[[mappings]]\n\
                gitlab_origin = \"https://g.example\"\nproject_path = \"a/b\"\n\
                local_path = \"/x\"\nport = 4400\n";
    check_invalid(
        text,
        Some("mappings[0].port"),
        7,
        "`port` is a top-level key but is written after the `[[mappings]]` table on line 3, \
         so TOML reads it as part of that table; move it above the first table",
    );
    let text = "[[providers]]\nid = \"p\"\nkind = \"anthropic\"\n\
                base_url = \"https://api.anthropic.com\"\ndefault_provider = \"p\"\n";
    check_invalid(
        text,
        Some("providers[0].default_provider"),
        5,
        "written after the `[[providers]]` table on line 1",
    );
    // A key that is not a top-level key keeps the plain message.
    check_invalid(
        "[limits]\nmax_reviews = 3\n",
        Some("limits.max_reviews"),
        2,
        "unknown field `max_reviews`, expected",
    );
}

#[test]
fn wrong_types() {
    check_invalid("port = \"4317\"\n", Some("port"), 1, "invalid type");
    check_invalid(
        "[limits]\n\nmax_concurrent_reviews = \"2\"\n",
        Some("limits.max_concurrent_reviews"),
        3,
        "invalid type",
    );
    check_invalid(
        "allowed_origins = \"https://gitlab.com\"\n",
        Some("allowed_origins"),
        1,
        "invalid type",
    );
    check_invalid("bind = \"localhost\"\n", Some("bind"), 1, "");
    check_invalid(
        "[[providers]]\nid = \"p\"\nkind = \"openai\"\nbase_url = \"http://x\"\n",
        Some("providers[0].kind"),
        3,
        "openai-compatible",
    );
}

#[test]
fn bad_ports_and_limits() {
    check_invalid("# c\nport = 70000\n", Some("port"), 2, "");
    check_invalid("port = -1\n", Some("port"), 1, "");
    check_invalid("port = 0\n", Some("port"), 1, "port 0 is not allowed");
    check_invalid(
        "[limits]\nmax_tool_calls_per_run = 0\n",
        Some("limits.max_tool_calls_per_run"),
        2,
        "at least 1",
    );
    check_invalid(
        "event_retention_hours = 0\n",
        Some("event_retention_hours"),
        1,
        "at least 1",
    );
}

#[test]
fn bad_origins() {
    check_invalid(
        "allowed_origins = [\n  \"https://gitlab.com\",\n  \"https://gitlab.com/\",\n]\n",
        Some("allowed_origins[1]"),
        3,
        "trailing slash",
    );
    check_invalid(
        "allowed_origins = [\"gitlab.com\"]\n",
        Some("allowed_origins[0]"),
        1,
        "invalid origin `gitlab.com`",
    );
    check_invalid(
        "[[mappings]]\ngitlab_origin = \"https://g.example\"\nproject_path = \"a/b\"\nlocal_path = \"/x\"\n\n[[mappings]]\ngitlab_origin = \"ftp://g.example\"\nproject_path = \"a/b\"\nlocal_path = \"/x\"\n",
        Some("mappings[1].gitlab_origin"),
        7,
        "not http or https",
    );
}

#[test]
fn bad_mappings_and_providers() {
    let mapping = |origin: &str, project: &str, local: &str| {
        format!(
            "[[mappings]]\ngitlab_origin = \"{origin}\"\nproject_path = \"{project}\"\nlocal_path = \"{local}\"\n"
        )
    };
    check_invalid(
        &mapping("https://g.example", "a/b", "relative/dir"),
        Some("mappings[0].local_path"),
        4,
        "absolute",
    );
    check_invalid(
        &mapping("https://g.example", "a//b", "/x"),
        Some("mappings[0].project_path"),
        3,
        "project path",
    );
    check_invalid(
        &format!(
            "{}{}",
            mapping("https://g.example", "a/b", "/x"),
            mapping("https://G.example:443", "a/b/", "/y")
        ),
        Some("mappings[1]"),
        5,
        "second mapping",
    );
    check_invalid(
        "[[mappings]]\ngitlab_origin = \"https://g.example\"\nproject_path = \"a/b\"\n",
        Some("mappings[0]"),
        1,
        "local_path",
    );
    check_invalid(
        "[[providers]]\nid = \"builtin\"\nkind = \"anthropic\"\nbase_url = \"https://a\"\n",
        Some("providers[0].id"),
        2,
        "builtin",
    );
    // The id names the key file `<config dir>/keys/<id>`: `..` would name the config dir.
    check_invalid(
        "[[providers]]\nid = \"..\"\nkind = \"anthropic\"\nbase_url = \"https://a\"\n",
        Some("providers[0].id"),
        2,
        "may not start with `.`",
    );
    check_invalid(
        "[[providers]]\nid = \"p\"\nkind = \"anthropic\"\nbase_url = \"api.anthropic.com\"\n",
        Some("providers[0].base_url"),
        4,
        "invalid URL",
    );
    check_invalid(
        "[[providers]]\nid = \"p\"\nkind = \"anthropic\"\nbase_url = \"https://a\"\n[[providers]]\nid = \"p\"\nkind = \"anthropic\"\nbase_url = \"https://b\"\n",
        Some("providers[1].id"),
        6,
        "second provider",
    );
}

#[test]
fn keys_in_providers_are_refused() {
    for (name, line) in [("api_key", 5), ("token", 5), ("API-KEY", 5), ("key", 5)] {
        let text = format!(
            "[[providers]]\nid = \"p\"\nkind = \"anthropic\"\nbase_url = \"https://a\"\n{name} = \"sk-secret\"\n"
        );
        check_invalid(
            &text,
            Some(&format!("providers[0].{name}")),
            line,
            "do not belong in the config file",
        );
        let err = GatewayError::from(parse(&text).expect_err("secret"));
        assert!(err.remediation.contains("keyring"), "{}", err.remediation);
        assert!(!err.message.contains("sk-secret"), "{}", err.message);
    }
    // Inline-table form too.
    check_invalid(
        "providers = [\n  { id = \"p\", kind = \"anthropic\", base_url = \"https://a\", api_key = \"x\" },\n]\n",
        Some("providers[0].api_key"),
        2,
        "keyring".trim_start_matches("keyring"),
    );
}

#[test]
fn syntax_errors_have_lines() {
    check_invalid(
        "port = 4317\n\nallowed_origins = [\n",
        None,
        3,
        "unclosed array",
    );
    check_invalid("port = = 1\n", None, 1, "");
}

#[test]
fn find_mapping_normalizes() {
    let config = parse(FULL).expect("valid");
    let m = config
        .find_mapping("https://GITLAB.example.com:443/", "group/sub/project/")
        .expect("found");
    assert_eq!(m.local_path, Path::new("/home/me/src/project"));
    assert!(
        config
            .find_mapping("https://gitlab.example.com", "Group/sub/project")
            .is_none()
    );
    assert!(
        config
            .find_mapping("http://gitlab.example.com", "group/sub/project")
            .is_none()
    );
    assert!(
        config
            .find_mapping("not an origin", "group/sub/project")
            .is_none()
    );
    assert!(
        config
            .find_mapping("https://gitlab.example.com", "group/sub")
            .is_none()
    );
}

// === load ===

#[test]
fn load_explicit_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.toml");
    let err = Config::load(Some(&missing)).expect_err("missing");
    assert!(matches!(err, ConfigError::NotFound { .. }));
    assert_eq!(GatewayError::from(err).code, "config.not_found");

    let path = dir.path().join("c.toml");
    std::fs::write(&path, "port = 5000\n").expect("write");
    let loaded = Config::load(Some(&path)).expect("load");
    assert!(loaded.from_file());
    assert_eq!(loaded.path(), path);
    assert_eq!(loaded.config().port, 5000);

    std::fs::write(&path, "port = 5000\nport = 5001\n").expect("write");
    let err = Config::load(Some(&path)).expect_err("duplicate key");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:2: ", path.display())),
        "{err}"
    );
}

// === edits ===

const COMMENTED: &str = r#"# Gateway config — hand-written.
port = 4317 # the default

# Origins I use
allowed_origins = ["https://gitlab.com"]

[limits]
max_concurrent_reviews = 3 # my laptop is fast

# first project
[[mappings]]
gitlab_origin = "https://gitlab.com"
project_path = "a/one"
local_path = "/src/one"
"#;

#[test]
fn add_and_remove_keep_comments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("two");
    std::fs::create_dir(&repo).expect("mkdir");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, COMMENTED).expect("write");

    config::add_mapping(
        &path,
        Mapping {
            gitlab_origin: "https://GitLab.com/".trim_end_matches('/').into(),
            project_path: "a/two/".into(),
            local_path: repo.clone(),
            default_ref: "trunk".into(),
        },
    )
    .expect("add");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(
        text.starts_with(COMMENTED),
        "the original text is kept as is:\n{text}"
    );
    assert!(text.contains("project_path = \"a/two\""), "{text}");
    let loaded = Config::load(Some(&path)).expect("load");
    let m = loaded
        .find_mapping("https://gitlab.com", "a/two")
        .expect("added");
    assert_eq!(m.local_path, repo);
    assert_eq!(m.default_ref, "trunk");
    assert_eq!(loaded.config().limits.max_concurrent_reviews, 3);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    // Duplicate (normalized) is refused and the file is unchanged.
    let err = config::add_mapping(
        &path,
        Mapping {
            gitlab_origin: "https://gitlab.com:443".into(),
            project_path: "a/two".into(),
            local_path: repo.clone(),
            default_ref: "main".into(),
        },
    )
    .expect_err("duplicate");
    assert!(matches!(err, ConfigError::DuplicateMapping { .. }), "{err}");
    assert_eq!(GatewayError::from(err).code, "repository.mapping_exists");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), text);

    // Remove the first one: the comments around the rest stay.
    assert!(config::remove_mapping(&path, "https://gitlab.com", "a/one/").expect("remove"));
    assert!(!config::remove_mapping(&path, "https://gitlab.com", "a/one").expect("gone"));
    let after = std::fs::read_to_string(&path).expect("read");
    assert!(after.contains("# Gateway config — hand-written.\nport = 4317 # the default\n"));
    assert!(after.contains("max_concurrent_reviews = 3 # my laptop is fast"));
    assert!(!after.contains("a/one"), "{after}");
    let loaded = Config::load(Some(&path)).expect("load");
    assert_eq!(loaded.config().mappings.len(), 1);
    assert_eq!(loaded.config().mappings[0].project_path, "a/two");
}

#[test]
fn add_to_missing_file_and_inline_arrays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested").join("config.toml");
    let mapping = |project: &str| Mapping {
        gitlab_origin: "https://gitlab.com".into(),
        project_path: project.into(),
        local_path: dir.path().to_owned(),
        default_ref: "main".into(),
    };
    config::add_mapping(&path, mapping("a/b")).expect("creates the file");
    assert_eq!(
        Config::load(Some(&path))
            .expect("load")
            .config()
            .mappings
            .len(),
        1
    );

    let inline = dir.path().join("inline.toml");
    std::fs::write(
        &inline,
        format!(
            "mappings = [\n  {{ gitlab_origin = \"https://gitlab.com\", project_path = \"x/y\", local_path = \"{}\" }}, # keep me\n]\n",
            dir.path().display()
        ),
    )
    .expect("write");
    config::add_mapping(&inline, mapping("a/b")).expect("add inline");
    let text = std::fs::read_to_string(&inline).expect("read");
    assert!(text.contains("# keep me"), "{text}");
    assert_eq!(
        Config::load(Some(&inline))
            .expect("load")
            .config()
            .mappings
            .len(),
        2
    );
    assert!(config::remove_mapping(&inline, "https://gitlab.com", "x/y").expect("remove"));
    assert_eq!(
        Config::load(Some(&inline))
            .expect("load")
            .config()
            .mappings
            .len(),
        1
    );
}

#[test]
fn add_checks_its_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.toml");
    let file = dir.path().join("file");
    std::fs::write(&file, "").expect("write");
    let base = Mapping {
        gitlab_origin: "https://gitlab.com".into(),
        project_path: "a/b".into(),
        local_path: dir.path().to_owned(),
        default_ref: "main".into(),
    };
    let cases: Vec<(Mapping, &str)> = vec![
        (
            Mapping {
                gitlab_origin: "gitlab.com".into(),
                ..base.clone()
            },
            "request.invalid",
        ),
        (
            Mapping {
                project_path: "".into(),
                ..base.clone()
            },
            "request.invalid",
        ),
        (
            Mapping {
                default_ref: "a b".into(),
                ..base.clone()
            },
            "request.invalid",
        ),
        (
            Mapping {
                local_path: "rel".into(),
                ..base.clone()
            },
            "request.invalid",
        ),
        (
            Mapping {
                local_path: dir.path().join("missing"),
                ..base.clone()
            },
            "repository.not_found",
        ),
        (
            Mapping {
                local_path: file.clone(),
                ..base.clone()
            },
            "repository.not_found",
        ),
    ];
    for (mapping, code) in cases {
        let err = config::add_mapping(&path, mapping.clone()).expect_err("refused");
        assert_eq!(GatewayError::from(err).code, code, "{mapping:?}");
    }
    assert!(!path.exists(), "nothing written");

    // An invalid existing file is not edited.
    std::fs::write(&path, "prot = 1\n").expect("write");
    let err = config::add_mapping(&path, base).expect_err("invalid file");
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "prot = 1\n");
}

/// `[mcp] commands` and `command_network` are off by default (the seed's opt-in
/// `AGENT_ENABLE_COMMANDS`); the network without commands is a mistake the check names.
#[test]
fn mcp_commands_are_opt_in() {
    let config = Config::default();
    assert!(!config.mcp.commands && !config.mcp.command_network);
    let config = parse("[mcp]\ncommands = true\ncommand_network = true\n").expect("valid");
    assert!(config.mcp.commands && config.mcp.command_network);
    check_invalid(
        "[mcp]\ncommand_network = true\n",
        Some("mcp.command_network"),
        2,
        "without `commands = true`",
    );
    check_invalid("[mcp]\ncommands = \"yes\"\n", Some("mcp.commands"), 2, "");
}

/// `[delegation]` (issue 15): off by default, `always` refused by default, the server started
/// by the gateway and sandboxed by default; a configured server must be a loopback origin and
/// come with the variable holding its password.
#[test]
fn delegation_is_opt_in_and_a_configured_server_needs_a_password() {
    let config = Config::default();
    let delegation = &config.delegation;
    assert!(!delegation.enabled && !delegation.allow_always && delegation.sandbox);
    assert_eq!(delegation.opencode_binary, std::path::Path::new("opencode"));
    assert_eq!(delegation.opencode_url, None);

    let config = parse(
        "[delegation]\nenabled = true\nopencode_url = \"http://127.0.0.1:4096\"\n\
         opencode_password_env = \"OPENCODE_SERVER_PASSWORD\"\nallow_always = true\n",
    )
    .expect("valid");
    assert!(config.delegation.enabled && config.delegation.allow_always);
    assert_eq!(
        config.delegation.opencode_password_env.as_deref(),
        Some("OPENCODE_SERVER_PASSWORD")
    );

    check_invalid(
        "[delegation]\nopencode_url = \"http://127.0.0.1:4096\"\n",
        Some("delegation.opencode_url"),
        2,
        "needs a password",
    );
    check_invalid(
        "[delegation]\nopencode_url = \"http://192.0.2.1:4096\"\nopencode_password_env = \"P\"\n",
        Some("delegation.opencode_url"),
        2,
        "not a loopback address",
    );
    check_invalid(
        "[delegation]\nopencode_password_env = \"P\"\n",
        Some("delegation.opencode_password_env"),
        2,
        "without `opencode_url`",
    );
    check_invalid(
        "[delegation]\nopencode_url = \"http://localhost:4096\"\nopencode_password_env = \"a-b\"\n",
        Some("delegation.opencode_password_env"),
        3,
        "not an environment variable name",
    );
    check_invalid(
        "[delegation]\nopencode_binary = \"bin/opencode\"\n",
        Some("delegation.opencode_binary"),
        2,
        "relative path",
    );
    check_invalid(
        "[delegation]\nauto_approve = true\n",
        Some("delegation.auto_approve"),
        2,
        "unknown field",
    );
}

#[test]
fn delegation_needs_a_provider_when_the_gateway_starts_opencode() {
    // No `provider`: the error points at the `[delegation]` table (the key is absent).
    check_invalid(
        "port = 4317\n\n[delegation]\nenabled = true\n",
        Some("delegation"),
        3,
        "needs a model: set `provider`",
    );
    check_invalid(
        "[[providers]]\nid = \"local\"\nkind = \"openai-compatible\"\n\
         base_url = \"http://127.0.0.1:1/v1\"\n\n[delegation]\nenabled = true\n\
         provider = \"locall\"\n",
        Some("delegation.provider"),
        8,
        "no `[[providers]]` entry has id `locall`",
    );
    // A server of the user's own needs no provider; off, nothing is required.
    assert!(
        parse(
            "[delegation]\nenabled = true\nopencode_url = \"http://127.0.0.1:4096\"\n\
         opencode_password_env = \"OPENCODE_SERVER_PASSWORD\"\n"
        )
        .is_ok()
    );
    assert!(parse("[delegation]\nprovider = \"nowhere\"\n").is_ok());
}

/// The README's `[[analyzers]]` example is a valid config, read as it says.
#[test]
fn readme_analyzers_example_parses() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .expect("read README.md");
    let section = readme
        .split("## External analyzers")
        .nth(1)
        .expect("README has an External analyzers section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section has a toml block");
    let config = Config::parse(block, Path::new("config.toml")).expect("the example parses");
    let names: Vec<&str> = config.analyzers.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["ruff", "semgrep", "gitleaks"]);
    assert_eq!(config.analyzers[0].paths, ["*.py"]);
    assert_eq!(config.analyzers[1].timeout_seconds, 600);
    assert!(config.analyzers.iter().all(|a| a.enabled && !a.network));
    assert_eq!(
        config.analyzers[2].severity,
        Some(review_agent_gateway::protocol::Severity::Critical)
    );
}

#[test]
fn allowed_origins_and_default_refs_are_edited_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.toml");
    let text = format!(
        "# mine\nport = 4317 # keep\n\n[[mappings]]\ngitlab_origin = \"https://gitlab.com\"\n\
         project_path = \"a/b\"\nlocal_path = \"{}\"\ndefault_ref = \"main\" # the branch\n",
        dir.path().display()
    );
    std::fs::write(&path, &text).expect("write");
    // A new top-level key lands above the first table, where it belongs.
    assert!(config::add_allowed_origin(&path, "https://GitLab.Example.com/").expect("add"));
    assert!(!config::add_allowed_origin(&path, "https://gitlab.example.com").expect("again"));
    let loaded = Config::load(Some(&path)).expect("load");
    assert_eq!(
        loaded.config().allowed_origins,
        vec!["https://gitlab.example.com"]
    );
    assert_eq!(loaded.config().mappings.len(), 1);
    let err = config::add_allowed_origin(&path, "not an origin").expect_err("refused");
    assert!(err.to_string().contains("allowed_origins"), "{err}");
    assert!(config::add_allowed_origin(&path, "http://gitlab.local:8080").expect("second"));
    assert!(config::remove_allowed_origin(&path, "https://gitlab.example.com/").expect("remove"));
    assert!(!config::remove_allowed_origin(&path, "https://gitlab.example.com").expect("gone"));
    let loaded = Config::load(Some(&path)).expect("load");
    assert_eq!(
        loaded.config().allowed_origins,
        vec!["http://gitlab.local:8080"]
    );

    assert!(config::set_default_ref(&path, "https://gitlab.com", "a/b", "develop").expect("set"));
    assert!(!config::set_default_ref(&path, "https://gitlab.com", "x/y", "develop").expect("none"));
    assert!(config::set_default_ref(&path, "https://gitlab.com", "a/b", "bad ref\n").is_err());
    let after = std::fs::read_to_string(&path).expect("read");
    assert!(after.starts_with("# mine\nport = 4317 # keep\n"), "{after}");
    let loaded = Config::load(Some(&path)).expect("load");
    assert_eq!(loaded.config().mappings[0].default_ref, "develop");
}
