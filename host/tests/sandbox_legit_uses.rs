//! Issue 13's other half: the sandbox stops escapes (`sandbox_escapes.rs`) *and* the checks a
//! reviewer legitimately runs still work in it — `pytest`, `npm test` and `eslint`, each
//! through `POST /v1/tools/run_check` on a real daemon and repository, confined by Landlock,
//! with the call's timeout and output cap.
//!
//! - `pytest` is the venv's console script named by its absolute path in the allowlist
//!   (`<workspace>/target/test-venv/bin/pytest`): the sandbox reads that venv because the
//!   program lies in its `bin` (the daemon's `PATH` is left alone, so the venv does not shadow
//!   the programs of every other command). `.pytest_cache` is the entry's `writable`
//!   directory; `tmp_path` lives in the call's `TMPDIR`.
//! - `npm test` runs Node's own runner (`node --test`); npm's logs and cache go to the call's
//!   `HOME`, its scratch directory.
//! - `eslint` is extension-bridge's (`node_modules/.bin/eslint`, a link into the package),
//!   made readable by `[sandbox] read`, with the repository's flat `eslint.config.js`.
//!
//! Not skippable (like the browser tests): without the venv, node/npm or extension-bridge's
//! `node_modules` a test fails and says to run `.ci/run`, which installs them.

mod common;

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::http::{self, Response as Reply};
use common::{git, read_port, token};
use serde_json::{Value, json};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";
const HINT: &str = "run `.ci/run` once (as root, or with sudo): it installs python3-venv, \
                    creates target/test-venv with pytest, and runs `npm ci` in extension-bridge/ \
                    (eslint)";

/// The venv's `pytest`, which must exist.
fn pytest() -> String {
    let venv = common::test_venv();
    let pytest = venv.join("bin/pytest");
    assert!(
        pytest.is_file() && venv.join("pyvenv.cfg").is_file(),
        "{} is missing: {HINT}",
        pytest.display()
    );
    pytest.display().to_string()
}

/// extension-bridge's `node_modules` and its `.bin/eslint`, which must exist.
fn eslint() -> (String, String) {
    let modules = common::extension_bridge().join("node_modules");
    let eslint = modules.join(".bin/eslint");
    assert!(eslint.exists(), "{} is missing: {HINT}", eslint.display());
    (modules.display().to_string(), eslint.display().to_string())
}

/// `npm`, which must run.
fn require_npm() {
    let runs = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(runs, "npm does not run: {HINT}");
}

struct Gateway {
    child: Child,
    port: u16,
    token: String,
    _home: tempfile::TempDir,
    _user_home: tempfile::TempDir,
    repo: tempfile::TempDir,
}

/// The repository: a Python package with its tests, a Node package whose test script is
/// `node --test`, a JS file with an unused variable and a flat eslint config.
const FILES: &[(&str, &str)] = &[
    (
        "pyproject.toml",
        "[tool.pytest.ini_options]\npythonpath = [\".\"]\ntestpaths = [\"tests\"]\n",
    ),
    (
        "calc/__init__.py",
        "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
    ),
    (
        "tests/test_calc.py",
        "import os\n\nfrom calc import add, mul\n\n\n\
         def test_add():\n    assert add(2, 3) == 5\n\n\n\
         def test_mul():\n    assert mul(2, 3) == 6\n\n\n\
         def test_tmp_path(tmp_path):\n\
         \x20   out = tmp_path / 'out.txt'\n\
         \x20   out.write_text('written')\n\
         \x20   assert out.read_text() == 'written'\n\
         \x20   assert str(tmp_path).startswith(os.environ['TMPDIR'])\n",
    ),
    (
        "more/test_broken.py",
        "from calc import add\n\n\ndef test_broken():\n    assert add(1, 1) == 3, 'arithmetic is broken'\n",
    ),
    (
        "package.json",
        "{\n  \"name\": \"tiny\",\n  \"version\": \"1.0.0\",\n  \"private\": true,\n  \
         \"scripts\": { \"test\": \"node --test\" }\n}\n",
    ),
    (
        "test/add.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\n\n\
         test('adds', () => {\n  assert.strictEqual(1 + 1, 2);\n});\n",
    ),
    (
        "eslint.config.js",
        "module.exports = [\n  { files: ['**/*.js'], rules: { 'no-unused-vars': 'error' } },\n];\n",
    ),
    ("src/lint_me.js", "const unused = 42;\n"),
    (".gitignore", ".pytest_cache/\n__pycache__/\n"),
];

impl Gateway {
    /// A daemon mapping the repository of [`FILES`], with `run_check` settings `limits` (lines
    /// of `[tools.run_check]`) and `rest` (command entries, `[sandbox]`).
    fn start(limits: &str, rest: &str) -> Gateway {
        let home = tempfile::tempdir().expect("gateway home");
        let user_home = tempfile::tempdir().expect("user home");
        let repo = tempfile::tempdir().expect("repo");
        let r = repo.path();
        git(r, &["init", "-q", "-b", "main"]);
        for (path, text) in FILES {
            let file = r.join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, text).expect("write");
        }
        git(r, &["add", "-A"]);
        git(r, &["commit", "-q", "-m", "checks"]);

        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\nproject_path = \"{PROJECT}\"\n\
             local_path = \"{}\"\n\n[tools.run_check]\nenabled = true\ntimeout_seconds = 300\n\
             {limits}\n\n{rest}",
            r.display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");

        let user = user_home.path().display().to_string();
        let mut child = http::spawn_serve(home.path(), &[("HOME", user.as_str())]);
        let port = read_port(&mut child);
        let token = token(home.path());
        Gateway {
            child,
            port,
            token,
            _home: home,
            _user_home: user_home,
            repo,
        }
    }

    /// `POST /v1/tools/run_check` in the work tree.
    fn run(&self, input: Value) -> Reply {
        common::post_run_check(self.port, &self.token, "WORKTREE", input)
    }

    /// The output of a call that ran, confined.
    fn output(&self, input: Value) -> Value {
        let reply = self.run(input.clone());
        assert_eq!(reply.status, 200, "{input}: {}", reply.body);
        let output = reply.json()["data"]["output"].clone();
        assert_eq!(output["sandbox"]["mode"], "landlock", "{output}");
        output
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdout(output: &Value) -> &str {
    output["stdout"].as_str().unwrap_or_default()
}

/// The allowlist entry of the venv's pytest.
fn pytest_entry(pytest: &str) -> String {
    format!(
        "[[tools.run_check.commands]]\nargv = [\"{pytest}\", \"-q\", \"**\"]\n\
         writable = [\".pytest_cache\"]\n"
    )
}

#[test]
fn pytest_runs_confined_and_reports_a_failure() {
    let pytest = pytest();
    let g = Gateway::start("", &pytest_entry(&pytest));
    let output = g.output(json!({ "argv": [pytest, "-q"] }));
    assert_eq!(output["exitCode"], 0, "{output}");
    assert!(stdout(&output).contains("3 passed"), "{output}");
    // The cache directory is the entry's `writable` one: pytest wrote its cache there.
    assert!(!stdout(&output).contains("PytestCacheWarning"), "{output}");
    assert!(
        g.repo
            .path()
            .join(".pytest_cache/v/cache/nodeids")
            .is_file(),
        "{output}"
    );

    let output = g.output(json!({ "argv": [pytest, "-q", "more/test_broken.py"] }));
    assert_eq!(output["exitCode"], 1, "{output}");
    let out = stdout(&output);
    assert!(
        out.contains("arithmetic is broken") && out.contains("1 failed"),
        "{output}"
    );
}

#[test]
fn npm_test_runs_node_test_confined() {
    require_npm();
    let g = Gateway::start(
        "",
        "[[tools.run_check.commands]]\nargv = [\"npm\", \"test\"]\n",
    );
    let output = g.output(json!({ "argv": ["npm", "test"] }));
    assert_eq!(output["exitCode"], 0, "{output}");
    let out = stdout(&output);
    // TAP (Node 18, 20) or spec (Node 22+) reporter.
    assert!(out.contains("node --test"), "{output}");
    assert!(out.contains("pass 1") && out.contains("fail 0"), "{output}");
}

#[test]
fn eslint_reports_a_problem_confined() {
    let (modules, eslint) = eslint();
    let g = Gateway::start(
        "",
        &format!(
            "[[tools.run_check.commands]]\nargv = [\"{eslint}\", \"**\"]\n\n\
             [sandbox]\nread = [\"{modules}\"]\n"
        ),
    );
    let output = g.output(json!({ "argv": [eslint, "src/lint_me.js"] }));
    assert_eq!(output["exitCode"], 1, "{output}");
    let out = stdout(&output);
    assert!(
        out.contains("'unused' is assigned a value but never used")
            && out.contains("no-unused-vars")
            && out.contains("1 problem"),
        "{output}"
    );
}

/// Whether a process whose command line holds `marker` is running.
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains(marker))
}

#[test]
fn a_sleeping_test_is_killed_at_the_timeout() {
    let pytest = pytest();
    let g = Gateway::start("", &pytest_entry(&pytest));
    let marker = format!("test_sleep_{}.py", std::process::id());
    std::fs::write(
        g.repo.path().join("more").join(&marker),
        "import time\n\n\ndef test_sleeps():\n    time.sleep(30)\n",
    )
    .expect("write");
    let started = Instant::now();
    let reply = std::thread::scope(|s| {
        let call = s.spawn(|| {
            g.run(json!({
                "argv": [pytest, "-q", format!("more/{marker}")],
                "timeoutSeconds": 1,
            }))
        });
        // It did start (so that none is left afterwards means something).
        let mut seen = false;
        while !call.is_finished() && !seen {
            seen = running(&marker);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(seen, "pytest was never seen running");
        call.join().expect("the call")
    });
    assert_eq!(reply.status, 200, "{}", reply.body);
    let output = &reply.json()["data"]["output"];
    assert_eq!(output["sandbox"]["mode"], "landlock", "{output}");
    assert_eq!(output["timedOut"], true, "{output}");
    assert_eq!(output["exitCode"], Value::Null, "{output}");
    assert!(started.elapsed() < Duration::from_secs(15), "{output}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(&marker) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!running(&marker), "no python process outlives the call");
}

#[test]
fn output_beyond_the_cap_is_truncated() {
    let pytest = pytest();
    let g = Gateway::start("max_output_bytes = 200", &pytest_entry(&pytest));
    let output = g.output(json!({ "argv": [pytest, "-q", "more/test_broken.py"] }));
    assert_eq!(output["exitCode"], 1, "{output}");
    assert_eq!(output["truncated"], true, "{output}");
    assert!(stdout(&output).len() <= 200, "{output}");
    assert!(
        output["stdoutBytes"].as_u64().unwrap_or_default() > 200,
        "{output}"
    );
}
