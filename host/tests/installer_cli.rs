//! `install`, `uninstall` and `doctor` through the real binary, against a temporary HOME (with
//! a space and non-ASCII characters) and a temporary root for `--system`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::bin;

const CHROME_ID: &str = "knldjmfmopnpolahpmmgbagdohdnhkik";

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("hôme dir")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("root")).expect("mkdir");
        Home { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("hôme dir")
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .args(args)
            .arg("--root")
            .arg(self.root())
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .env("REVIEW_AGENT_GATEWAY_HOME", self.dir.path().join("gw"))
            .output()
            .expect("run the binary")
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out.sort();
        out
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn install_dry_run_uninstall_every_browser_user_and_system() {
    let home = Home::new();
    for system in [false, true] {
        let mut args = vec!["install", "--browser", "all", "--extension-id", CHROME_ID];
        if system {
            args.push("--system");
        }
        let before = home.files();
        let mut dry = args.clone();
        dry.push("--dry-run");
        let out = home.run(&dry);
        assert!(out.status.success(), "{out:?}");
        // Nothing was written, so nothing may read as done (issue 12 §5).
        let text = stdout(&out);
        assert!(
            text.contains("[dry run] would write manifest")
                && text.contains("[dry run] would write launcher")
                && !text.contains("] wrote")
                && !text.contains("] created"),
            "{text}"
        );
        assert_eq!(home.files(), before, "--dry-run wrote files");

        let out = home.run(&args);
        assert!(out.status.success(), "{out:?}");
        let text = stdout(&out);
        let written: Vec<PathBuf> = text
            .lines()
            .filter_map(|l| {
                l.strip_prefix("wrote manifest ")
                    .or_else(|| l.strip_prefix("wrote launcher "))
            })
            .map(PathBuf::from)
            .collect();
        let base = if system { home.root() } else { home.home() };
        // user: 7 browsers; system: 5 distinct directories. A manifest and a launcher each.
        assert_eq!(written.len(), if system { 10 } else { 14 }, "{text}");
        for path in &written {
            assert!(path.starts_with(&base), "{}", path.display());
            assert!(path.is_file(), "{} printed but not written", path.display());
        }
        // The launchers pass the install's REVIEW_AGENT_GATEWAY_HOME on to the host: a browser
        // started from the desktop does not have the installing shell's environment.
        let gateway_home = home.dir.path().join("gw");
        for launcher in written
            .iter()
            .filter(|p| !p.to_string_lossy().ends_with(".json"))
        {
            let script = std::fs::read_to_string(launcher).expect("launcher");
            assert!(
                script.contains(&format!(
                    "REVIEW_AGENT_GATEWAY_HOME='{}'\nexport REVIEW_AGENT_GATEWAY_HOME\n",
                    gateway_home.display()
                )),
                "{script}"
            );
        }
        if !system {
            // Run one as the browser would, with an empty environment (no HOME, so no
            // installed manifest to allow the caller: the host refuses it, exit 1): its log
            // goes to the install's home, so that is the home it uses.
            let launcher = written
                .iter()
                .find(|p| {
                    let p = p.to_string_lossy();
                    p.contains("chromium/NativeMessagingHosts/") && !p.ends_with(".json")
                })
                .expect("the Chromium launcher");
            let out = Command::new(launcher)
                .arg(format!("chrome-extension://{CHROME_ID}/"))
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .stdin(std::process::Stdio::null())
                .output()
                .expect("the launcher runs");
            assert_eq!(out.status.code(), Some(1), "{out:?}");
            assert!(
                gateway_home.join("state/logs/native-host.log").is_file(),
                "the host did not use the install's home"
            );
            std::fs::remove_dir_all(gateway_home.join("state")).expect("remove the host's log");
        }
        let new_files: Vec<PathBuf> = home
            .files()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        let mut printed = written.clone();
        printed.sort();
        assert_eq!(new_files, printed, "every file written is printed");

        let mut un = vec!["uninstall", "--browser", "all"];
        if system {
            un.push("--system");
        }
        let out = home.run(&un);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            home.files(),
            before,
            "uninstall removes exactly what install wrote"
        );
    }
}

#[test]
fn install_refuses_bad_ids_and_names() {
    let home = Home::new();
    let out = home.run(&[
        "install",
        "--browser",
        "chrome",
        "--extension-id",
        "not-an-id",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error[request.invalid]"));
    let out = home.run(&["install", "--browser", "safari"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(home.files().is_empty());
    // No Chrome id given: the companion extension's (fixed by the `key` in
    // extension-bridge/extension/manifest.json) is allowed.
    let out = home.run(&["install", "--browser", "chrome"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let manifest = home
        .files()
        .into_iter()
        .find(|p| p.ends_with("com.review_agent.gateway.json"))
        .expect("a manifest was written");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(manifest).expect("read")).expect("JSON");
    assert_eq!(
        manifest["allowed_origins"],
        serde_json::json!(["chrome-extension://dfdnfmehigamlgmiglpnpoakceohheag/"])
    );
}

#[test]
fn doctor_reports_each_problem_with_a_fix_and_fails() {
    let home = Home::new();
    let out = home.run(&["doctor", "--port", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("problem[manifest.not_installed]"),
        "{}",
        stdout(&out)
    );

    let out = home.run(&[
        "install",
        "--browser",
        "chrome,firefox",
        "--extension-id",
        CHROME_ID,
    ]);
    assert!(out.status.success(), "{out:?}");
    let manifest = home
        .home()
        .join(".config/google-chrome/NativeMessagingHosts/com.review_agent.gateway.json");
    let text = std::fs::read_to_string(&manifest).expect("read");
    std::fs::write(&manifest, text.replace(&format!("{CHROME_ID}/"), CHROME_ID)).expect("write");
    let out = home.run(&[
        "doctor",
        "--browser",
        "chrome",
        "--extension-id",
        CHROME_ID,
        "--port",
        "1",
        "--hello-timeout-ms",
        "3000",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report = stdout(&out);
    assert!(
        report.contains("problem[manifest.origin_invalid]")
            && report.contains("trailing slash is missing"),
        "{report}"
    );
    assert!(
        report.contains("fix: run `review-agent-gateway install --browser chrome"),
        "{report}"
    );
    assert!(report.contains("problem[daemon.unreachable]"), "{report}");

    // Restored: the manifest is fine; the host answers hello — it starts the daemon of this
    // home (on a free port of its config, stopped when the test ends) to do so.
    std::fs::write(&manifest, text).expect("write");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let gw = home.dir.path().join("gw");
    std::fs::create_dir_all(gw.join("config")).expect("mkdir");
    std::fs::write(gw.join("config/config.toml"), format!("port = {port}\n")).expect("write");
    let _daemon = StopDaemon(gw.join("state/logs/native-host.log"));
    let port = port.to_string();
    let out = home.run(&[
        "doctor",
        "--browser",
        "firefox",
        "--port",
        &port,
        "--hello-timeout-ms",
        "10000",
    ]);
    let report = stdout(&out);
    assert!(!report.contains("problem["), "{report}");
    assert!(
        report.contains("ok: manifest valid; the host answered hello"),
        "{report}"
    );
    assert!(
        report.contains("ok: GET /v1/health answered 200"),
        "{report}"
    );
    assert_eq!(out.status.code(), Some(0), "{report}");
}

/// Kills the daemon a native host started (its pid is in the host's log) when dropped.
struct StopDaemon(PathBuf);

impl Drop for StopDaemon {
    fn drop(&mut self) {
        let log = std::fs::read_to_string(&self.0).unwrap_or_default();
        for line in log.lines().filter(|l| l.contains("started the daemon")) {
            let pid = line
                .split("pid=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
}

/// `doctor` says which sandbox mode is in force for the commands the gateway runs (DESIGN §13):
/// Landlock with its ABI here, or the user's explicit unconfined mode.
#[test]
fn doctor_reports_the_sandbox_mode() {
    let home = Home::new();
    let out = home.run(&["doctor", "--port", "1", "--hello-timeout-ms", "500"]);
    let report = stdout(&out);
    assert!(
        report.contains("sandbox\n  ok: commands run confined by Landlock (ABI "),
        "{report}"
    );
    let config = home.dir.path().join("gw/config/config.toml");
    std::fs::create_dir_all(config.parent().expect("parent")).expect("mkdir");
    std::fs::write(&config, "[sandbox]\nmode = \"unconfined\"\n").expect("write");
    let report = stdout(&home.run(&["doctor", "--port", "1", "--hello-timeout-ms", "500"]));
    assert!(
        report.contains("note: `[sandbox] mode = \"unconfined\"`: commands run WITHOUT kernel"),
        "{report}"
    );
    // A config that does not load is a problem of its own, not silently the defaults.
    std::fs::write(&config, "[sandbox]\nmode = \"landlok\"\n").expect("write");
    let out = home.run(&["doctor", "--port", "1", "--hello-timeout-ms", "500"]);
    let report = stdout(&out);
    assert!(report.contains("problem[config.invalid]"), "{report}");
    assert!(report.contains("landlok"), "{report}");
    assert_eq!(out.status.code(), Some(1));
}

/// `doctor` lists the configured analyzers: a program it finds, and one it does not (a problem
/// with its fix).
#[test]
fn doctor_checks_the_analyzers_programs() {
    let home = Home::new();
    let gw = home.dir.path().join("gw");
    std::fs::create_dir_all(gw.join("config")).expect("mkdir");
    std::fs::write(
        gw.join("config/config.toml"),
        "[[analyzers]]\nname = \"present\"\ncommand = [\"/bin/sh\", \"-c\", \"true\"]\n\n\
         [[analyzers]]\nname = \"absent\"\ncommand = [\"no-such-analyzer-anywhere\"]\n\n\
         [[analyzers]]\nname = \"off\"\ncommand = [\"also-missing\"]\nenabled = false\n",
    )
    .expect("write");
    let out = home.run(&["doctor", "--port", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let report = stdout(&out);
    assert!(
        report.contains("analyzers\n  ok: present: /bin/sh"),
        "{report}"
    );
    assert!(
        report.contains("problem[analyzer.not_found]")
            && report.contains("`no-such-analyzer-anywhere` is not an executable file in PATH"),
        "{report}"
    );
    assert!(!report.contains("also-missing"), "{report}");
}
