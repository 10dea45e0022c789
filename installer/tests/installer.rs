//! The installer against temporary home and root directories: every browser, both manifest
//! kinds, Flatpak present and absent, system paths under an injected root, Windows plans,
//! `dry_run`, install/uninstall symmetry, paths with spaces and non-ASCII characters, and the
//! doctor catching what a browser would refuse.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use installer::apply::{self, Action};
use installer::doctor::{self, DoctorOptions};
use installer::{Browser, Environment, ExtensionIds, InstallRequest, Os, Scope, plan};
use serde_json::Value;

const CHROME_ID: &str = "knldjmfmopnpolahpmmgbagdohdnhkik";
const FIREFOX_ID: &str = "companion@review-agent-gateway";

struct Sandbox {
    _dir: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
    binary: PathBuf,
}

impl Sandbox {
    /// A home and a root whose names have spaces and non-ASCII characters, and an executable
    /// "host binary" (a script printing its arguments) in a folder with a quote in its name.
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home dir ü 日本");
        let root = dir.path().join("root");
        let bin_dir = dir.path().join("bin dir é 'q'");
        for d in [&home, &root, &bin_dir] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let binary = bin_dir.join("review agent gateway");
        std::fs::write(&binary, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").expect("write binary");
        chmod(&binary, 0o755);
        Sandbox {
            _dir: dir,
            home,
            root,
            binary,
        }
    }

    fn env(&self, os: Os) -> Environment {
        Environment {
            os,
            home: self.home.clone(),
            xdg_config_home: None,
            root: self.root.clone(),
            local_app_data: Some(PathBuf::from(r"C:\Users\Zoë\AppData\Local")),
            program_data: Some(PathBuf::from(r"C:\ProgramData")),
            flatpaks: installer::plan::detect_flatpaks(&self.home, &self.root),
            has_lib64: self.root.join("usr/lib64").is_dir(),
            gateway_home: None,
        }
    }

    /// Every file under home and root with its bytes.
    fn files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        for base in [&self.home, &self.root] {
            walk(base, &mut out);
        }
        out
    }
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn ids() -> ExtensionIds {
    ExtensionIds::parse(&[CHROME_ID, FIREFOX_ID]).expect("ids")
}

fn targets(
    sandbox: &Sandbox,
    env: &Environment,
    browsers: &[Browser],
    scope: Scope,
) -> Vec<installer::Target> {
    let ids = ids();
    plan(
        env,
        &InstallRequest {
            browsers,
            scope,
            ids: &ids,
            host_binary: &sandbox.binary,
        },
    )
    .expect("plan")
}

/// Manifest directories relative to home (user) or root (system), per browser.
fn relative_dirs(
    sandbox: &Sandbox,
    env: &Environment,
    scope: Scope,
) -> Vec<(Browser, Option<&'static str>, String)> {
    let base = match scope {
        Scope::User => &sandbox.home,
        Scope::System => &sandbox.root,
    };
    installer::locations(env, &Browser::ALL, scope)
        .expect("locations")
        .into_iter()
        .map(|l| {
            let dir = l.manifest_path.parent().expect("parent");
            let rel = dir
                .strip_prefix(base)
                .expect("under base")
                .display()
                .to_string();
            (l.browser, l.flatpak, rel)
        })
        .collect()
}

#[test]
fn linux_user_locations_for_every_browser() {
    let sandbox = Sandbox::new();
    let env = sandbox.env(Os::Linux);
    assert_eq!(
        relative_dirs(&sandbox, &env, Scope::User),
        [
            (
                Browser::Chrome,
                None,
                ".config/google-chrome/NativeMessagingHosts".to_owned()
            ),
            (
                Browser::Chromium,
                None,
                ".config/chromium/NativeMessagingHosts".to_owned()
            ),
            (
                Browser::Edge,
                None,
                ".config/microsoft-edge/NativeMessagingHosts".to_owned()
            ),
            (
                Browser::Brave,
                None,
                ".config/BraveSoftware/Brave-Browser/NativeMessagingHosts".to_owned()
            ),
            (
                Browser::Vivaldi,
                None,
                ".config/vivaldi/NativeMessagingHosts".to_owned()
            ),
            (
                Browser::Firefox,
                None,
                ".mozilla/native-messaging-hosts".to_owned()
            ),
            (
                Browser::Librewolf,
                None,
                ".librewolf/native-messaging-hosts".to_owned()
            ),
        ]
    );
    // $XDG_CONFIG_HOME moves the Chrome family, not Firefox.
    let mut xdg = env.clone();
    xdg.xdg_config_home = Some(sandbox.home.join("xdg"));
    let dirs = relative_dirs(&sandbox, &xdg, Scope::User);
    assert_eq!(dirs[0].2, "xdg/google-chrome/NativeMessagingHosts");
    assert_eq!(dirs[5].2, ".mozilla/native-messaging-hosts");
}

#[test]
fn flatpak_locations_only_when_the_flatpak_is_installed() {
    let sandbox = Sandbox::new();
    let none = relative_dirs(&sandbox, &sandbox.env(Os::Linux), Scope::User);
    assert!(none.iter().all(|(_, flatpak, _)| flatpak.is_none()));
    // One found by its data dir, one by a user installation, one by a system installation.
    std::fs::create_dir_all(sandbox.home.join(".var/app/org.chromium.Chromium")).expect("mkdir");
    std::fs::create_dir_all(
        sandbox
            .home
            .join(".local/share/flatpak/app/org.mozilla.firefox"),
    )
    .expect("mkdir");
    std::fs::create_dir_all(sandbox.root.join("var/lib/flatpak/app/com.google.Chrome"))
        .expect("mkdir");
    let env = sandbox.env(Os::Linux);
    let flatpak: Vec<_> = relative_dirs(&sandbox, &env, Scope::User)
        .into_iter()
        .filter(|(_, f, _)| f.is_some())
        .collect();
    assert_eq!(
        flatpak,
        [
            (
                Browser::Chrome,
                Some("com.google.Chrome"),
                ".var/app/com.google.Chrome/config/google-chrome/NativeMessagingHosts".to_owned()
            ),
            (
                Browser::Chromium,
                Some("org.chromium.Chromium"),
                ".var/app/org.chromium.Chromium/config/chromium/NativeMessagingHosts".to_owned()
            ),
            (
                Browser::Firefox,
                Some("org.mozilla.firefox"),
                ".var/app/org.mozilla.firefox/.mozilla/native-messaging-hosts".to_owned()
            ),
        ]
    );
    // The sandboxed launcher leaves the sandbox through flatpak-spawn; the native one does not.
    let all = targets(&sandbox, &env, &[Browser::Chromium], Scope::User);
    assert_eq!(all.len(), 2);
    assert!(
        !all[0]
            .launcher
            .as_deref()
            .expect("launcher")
            .contains("flatpak-spawn")
    );
    assert!(
        all[1]
            .launcher
            .as_deref()
            .expect("launcher")
            .contains("flatpak-spawn --host")
    );
    // Never for the system scope.
    assert!(
        relative_dirs(&sandbox, &env, Scope::System)
            .iter()
            .all(|(_, f, _)| f.is_none())
    );
}

#[test]
fn system_locations_linux_and_macos_under_the_injected_root() {
    let sandbox = Sandbox::new();
    let linux: Vec<String> = relative_dirs(&sandbox, &sandbox.env(Os::Linux), Scope::System)
        .into_iter()
        .map(|(b, _, d)| format!("{b} {d}"))
        .collect();
    assert_eq!(
        linux,
        [
            "chrome etc/opt/chrome/native-messaging-hosts",
            "chromium etc/chromium/native-messaging-hosts",
            "edge etc/opt/edge/native-messaging-hosts",
            "brave etc/opt/chrome/native-messaging-hosts",
            "vivaldi etc/chromium/native-messaging-hosts",
            "firefox usr/lib/mozilla/native-messaging-hosts",
            "librewolf usr/lib/librewolf/native-messaging-hosts",
        ]
    );
    std::fs::create_dir_all(sandbox.root.join("usr/lib64")).expect("mkdir");
    let with_lib64 = relative_dirs(&sandbox, &sandbox.env(Os::Linux), Scope::System);
    assert!(
        with_lib64
            .iter()
            .any(|(_, _, d)| d == "usr/lib64/mozilla/native-messaging-hosts")
    );

    let mac: Vec<String> = relative_dirs(&sandbox, &sandbox.env(Os::MacOs), Scope::System)
        .into_iter()
        .map(|(b, _, d)| format!("{b} {d}"))
        .collect();
    assert_eq!(
        mac,
        [
            "chrome Library/Google/Chrome/NativeMessagingHosts",
            "chromium Library/Application Support/Chromium/NativeMessagingHosts",
            "edge Library/Microsoft/Edge/NativeMessagingHosts",
            "brave Library/Application Support/BraveSoftware/Brave-Browser/NativeMessagingHosts",
            "vivaldi Library/Application Support/Vivaldi/NativeMessagingHosts",
            "firefox Library/Application Support/Mozilla/NativeMessagingHosts",
            "librewolf Library/Application Support/LibreWolf/NativeMessagingHosts",
        ]
    );
    let mac_user = relative_dirs(&sandbox, &sandbox.env(Os::MacOs), Scope::User);
    assert_eq!(
        mac_user[0].2,
        "Library/Application Support/Google/Chrome/NativeMessagingHosts"
    );
    assert_eq!(
        mac_user[2].2,
        "Library/Application Support/Microsoft Edge/NativeMessagingHosts"
    );
    assert_eq!(
        mac_user[5].2,
        "Library/Application Support/Mozilla/NativeMessagingHosts"
    );
}

#[test]
fn windows_plans_use_registry_keys_and_the_binary_itself() {
    let sandbox = Sandbox::new();
    let env = sandbox.env(Os::Windows);
    let ids = ids();
    let binary = PathBuf::from(r"C:\Program Files\Review Agent Gateway\review-agent-gateway.exe");
    let request = |scope| InstallRequest {
        browsers: &Browser::ALL,
        scope,
        ids: &ids,
        host_binary: &binary,
    };
    let user = plan(&env, &request(Scope::User)).expect("plan");
    let keys: Vec<String> = user
        .iter()
        .map(|t| t.location.registry.as_ref().expect("key").to_string())
        .collect();
    let name = installer::HOST_NAME;
    assert_eq!(
        keys,
        [
            format!(r"HKEY_CURRENT_USER\Software\Google\Chrome\NativeMessagingHosts\{name}"),
            format!(r"HKEY_CURRENT_USER\Software\Chromium\NativeMessagingHosts\{name}"),
            format!(r"HKEY_CURRENT_USER\Software\Microsoft\Edge\NativeMessagingHosts\{name}"),
            format!(r"HKEY_CURRENT_USER\Software\Google\Chrome\NativeMessagingHosts\{name}"),
            format!(r"HKEY_CURRENT_USER\Software\Google\Chrome\NativeMessagingHosts\{name}"),
            format!(r"HKEY_CURRENT_USER\Software\Mozilla\NativeMessagingHosts\{name}"),
            format!(r"HKEY_CURRENT_USER\Software\LibreWolf\NativeMessagingHosts\{name}"),
        ]
    );
    assert_eq!(
        user[0].location.manifest_path,
        PathBuf::from(format!(
            r"C:\Users\Zoë\AppData\Local\review-agent-gateway\NativeMessagingHosts\chrome\{name}.json"
        ))
    );
    assert!(
        user.iter()
            .all(|t| t.launcher.is_none() && t.location.launcher_path.is_none())
    );
    assert_eq!(user[0].manifest["path"], binary.to_str().expect("utf-8"));
    let system = plan(&env, &request(Scope::System)).expect("plan");
    assert!(
        system[5]
            .location
            .registry
            .as_ref()
            .expect("key")
            .to_string()
            .starts_with(r"HKEY_LOCAL_MACHINE\Software\Mozilla")
    );
    assert!(
        system[5]
            .location
            .manifest_path
            .to_str()
            .expect("utf-8")
            .starts_with(r"C:\ProgramData\review-agent-gateway")
    );
    // Off Windows the registry cannot be written: applying fails instead of pretending.
    let cwd_before: Vec<_> = std::fs::read_dir(".")
        .expect("cwd")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(apply::install(&user[..1], false).is_err());
    let cwd_after: Vec<_> = std::fs::read_dir(".")
        .expect("cwd")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(cwd_before, cwd_after, "nothing written before the refusal");
    let dry = apply::install(&user, true).expect("dry run");
    let manifests = dry
        .iter()
        .filter(|a| matches!(a, Action::WroteManifest(_)))
        .count();
    let keys = dry
        .iter()
        .filter(|a| matches!(a, Action::SetRegistry { .. }))
        .count();
    assert_eq!(
        (manifests, keys),
        (2, 5),
        "one manifest per family, one value per distinct key"
    );
}

#[test]
fn both_manifest_kinds_never_both_allowlists() {
    let sandbox = Sandbox::new();
    let env = sandbox.env(Os::Linux);
    for target in targets(&sandbox, &env, &Browser::ALL, Scope::User) {
        let m = &target.manifest;
        let keys: BTreeSet<&str> = m
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        match target.location.browser {
            Browser::Firefox | Browser::Librewolf => {
                assert_eq!(
                    keys,
                    BTreeSet::from(["name", "description", "path", "type", "allowed_extensions"])
                );
                assert_eq!(m["allowed_extensions"], serde_json::json!([FIREFOX_ID]));
            }
            _ => {
                assert_eq!(
                    keys,
                    BTreeSet::from(["name", "description", "path", "type", "allowed_origins"])
                );
                assert_eq!(
                    m["allowed_origins"],
                    serde_json::json!([format!("chrome-extension://{CHROME_ID}/")])
                );
            }
        }
        assert_eq!(m["type"], "stdio");
        assert_eq!(
            Path::new(m["path"].as_str().expect("path")),
            target.location.launcher_path.as_deref().expect("launcher")
        );
    }
    // A family without ids is refused rather than written with an empty allowlist.
    let only_firefox = ExtensionIds::parse(&[FIREFOX_ID]).expect("ids");
    let err = plan(
        &env,
        &InstallRequest {
            browsers: &[Browser::Chrome],
            scope: Scope::User,
            ids: &only_firefox,
            host_binary: &sandbox.binary,
        },
    )
    .expect_err("no chrome id");
    assert_eq!(err.code(), "request.invalid");
    let err = plan(
        &env,
        &InstallRequest {
            browsers: &[Browser::Firefox],
            scope: Scope::User,
            ids: &only_firefox,
            host_binary: Path::new("relative/bin"),
        },
    )
    .expect_err("relative binary");
    assert!(err.to_string().contains("not absolute"));
}

#[test]
fn dry_run_writes_nothing_and_install_uninstall_are_symmetric() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.home.join(".var/app/org.mozilla.firefox")).expect("mkdir");
    // Someone else's host next to ours, and a pre-existing config file.
    let foreign_dir = sandbox
        .home
        .join(".config/google-chrome/NativeMessagingHosts");
    std::fs::create_dir_all(&foreign_dir).expect("mkdir");
    std::fs::write(
        foreign_dir.join("org.other.host.json"),
        r#"{"name":"org.other.host"}"#,
    )
    .expect("write");
    std::fs::write(sandbox.home.join(".config/google-chrome/Local State"), "{}").expect("write");
    let env = sandbox.env(Os::Linux);
    let before = sandbox.files();
    for scope in [Scope::User, Scope::System] {
        let plan = targets(&sandbox, &env, &Browser::ALL, scope);
        let dry = apply::install(&plan, true).expect("dry run");
        assert!(dry.iter().any(|a| matches!(a, Action::WroteManifest(_))));
        assert_eq!(sandbox.files(), before, "dry run changed files");
    }
    let mut written = BTreeSet::new();
    for scope in [Scope::User, Scope::System] {
        let plan = targets(&sandbox, &env, &Browser::ALL, scope);
        for action in apply::install(&plan, false).expect("install") {
            match action {
                Action::WroteManifest(p) | Action::WroteLauncher(p) => {
                    assert!(written.insert(p.clone()), "{} written twice", p.display());
                }
                Action::CreatedDir(_) => {}
                other => panic!("unexpected {other}"),
            }
        }
    }
    // 7 user + 1 Flatpak + 5 distinct system dirs (Brave shares Chrome's, Vivaldi Chromium's).
    assert_eq!(written.len(), (7 + 1 + 5) * 2);
    let after = sandbox.files();
    let added: BTreeSet<PathBuf> = after
        .keys()
        .filter(|p| !before.contains_key(*p))
        .cloned()
        .collect();
    assert_eq!(added, written);
    for path in &written {
        let bytes = &after[path];
        assert!(
            !bytes.starts_with(b"\xEF\xBB\xBF"),
            "BOM in {}",
            path.display()
        );
        std::str::from_utf8(bytes).expect("UTF-8");
        if path.extension().is_some_and(|e| e == "json") {
            let m: Value = serde_json::from_slice(bytes).expect("JSON");
            assert_eq!(m["name"], installer::HOST_NAME);
        } else {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(path).expect("meta").permissions().mode() & 0o777,
                0o755
            );
        }
    }
    // Uninstall removes exactly those files, and leaves the foreign ones.
    let mut removed = BTreeSet::new();
    for scope in [Scope::User, Scope::System] {
        let locations = installer::locations(&env, &Browser::ALL, scope).expect("locations");
        let dry = apply::uninstall(&locations, true).expect("dry uninstall");
        assert!(!dry.is_empty());
        for action in apply::uninstall(&locations, false).expect("uninstall") {
            if let Action::Removed(p) = action {
                removed.insert(p);
            }
        }
    }
    assert_eq!(removed, written);
    assert_eq!(sandbox.files(), before);
    assert!(
        foreign_dir.is_dir(),
        "a directory with other hosts in it stays"
    );
    assert!(
        !sandbox
            .home
            .join(".mozilla/native-messaging-hosts")
            .exists(),
        "our emptied directory goes"
    );
}

#[test]
fn uninstall_leaves_files_that_are_not_ours() {
    let sandbox = Sandbox::new();
    let env = sandbox.env(Os::Linux);
    let locations = installer::locations(&env, &[Browser::Chrome], Scope::User).expect("locations");
    let manifest = &locations[0].manifest_path;
    let launcher = locations[0].launcher_path.as_ref().expect("launcher");
    std::fs::create_dir_all(manifest.parent().expect("dir")).expect("mkdir");
    std::fs::write(manifest, r#"{"name": "com.someone.else"}"#).expect("write");
    std::fs::write(launcher, "#!/bin/sh\necho hand-made\n").expect("write");
    let actions = apply::uninstall(&locations, false).expect("uninstall");
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert!(
        actions
            .iter()
            .all(|a| matches!(a, Action::SkippedNotOurs { .. }))
    );
    assert!(manifest.exists() && launcher.exists());
}

#[test]
fn launchers_run_the_binary_in_native_host_mode_with_the_browser_arguments() {
    let sandbox = Sandbox::new();
    let env = sandbox.env(Os::Linux);
    let plan = targets(
        &sandbox,
        &env,
        &[Browser::Chrome, Browser::Firefox],
        Scope::User,
    );
    apply::install(&plan, false).expect("install");
    for target in &plan {
        let launcher = target.location.launcher_path.as_ref().expect("launcher");
        let origin = format!("chrome-extension://{CHROME_ID}/");
        let out = std::process::Command::new(launcher)
            .arg(&origin)
            .arg("a b ü")
            .output()
            .expect("run launcher");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("native-host\n{origin}\na b ü\n")
        );
    }
}

fn doctor_codes(env: &Environment, browsers: &[Browser], expected: &ExtensionIds) -> Vec<String> {
    let reports = doctor::inspect(
        env,
        &DoctorOptions {
            browsers,
            scopes: &[Scope::User],
            expected,
            probe_host: false,
            hello_timeout: Duration::from_secs(2),
        },
    )
    .expect("inspect");
    reports
        .iter()
        .flat_map(|r| r.problems.iter().map(|p| p.code.to_string()))
        .collect()
}

#[test]
fn doctor_catches_what_the_browser_would_refuse() {
    let sandbox = Sandbox::new();
    let env = sandbox.env(Os::Linux);
    let expected = ids();
    let none = ExtensionIds::default();
    assert!(
        doctor::inspect(
            &env,
            &DoctorOptions {
                browsers: &Browser::ALL,
                scopes: &[Scope::User],
                expected: &none,
                probe_host: false,
                hello_timeout: Duration::from_secs(1)
            }
        )
        .expect("inspect")
        .is_empty(),
        "nothing installed: nothing to report"
    );
    let plan = targets(
        &sandbox,
        &env,
        &[Browser::Chrome, Browser::Firefox],
        Scope::User,
    );
    apply::install(&plan, false).expect("install");
    assert_eq!(
        doctor_codes(&env, &[Browser::Chrome, Browser::Firefox], &expected),
        Vec::<&str>::new()
    );

    let chrome = &plan[0].location;
    let firefox = &plan[1].location;
    let original = std::fs::read_to_string(&chrome.manifest_path).expect("read");
    let put = |path: &Path, text: &[u8]| std::fs::write(path, text).expect("write");
    let check = |browser, expect: &[&str]| {
        assert_eq!(doctor_codes(&env, &[browser], &expected), expect);
    };

    put(
        &chrome.manifest_path,
        original
            .replace(&format!("{CHROME_ID}/"), CHROME_ID)
            .as_bytes(),
    );
    check(
        Browser::Chrome,
        &["manifest.origin_invalid", "manifest.extension_not_allowed"],
    );

    let other_id = "abcdefghijklmnopabcdefghijklmnop";
    put(
        &chrome.manifest_path,
        original.replace(CHROME_ID, other_id).as_bytes(),
    );
    check(Browser::Chrome, &["manifest.extension_not_allowed"]);
    put(
        &chrome.manifest_path,
        original
            .replace(CHROME_ID, "ZZZdefghijklmnopabcdefghijklmnop")
            .as_bytes(),
    );
    check(
        Browser::Chrome,
        &["manifest.origin_invalid", "manifest.extension_not_allowed"],
    );

    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(original.as_bytes());
    put(&chrome.manifest_path, &bom);
    check(Browser::Chrome, &["manifest.bom"]);

    put(
        &chrome.manifest_path,
        &original.as_bytes()[..original.len() / 2],
    );
    check(Browser::Chrome, &["manifest.json_invalid"]);

    put(&chrome.manifest_path, original.as_bytes());
    let launcher = chrome.launcher_path.as_ref().expect("launcher");
    chmod(launcher, 0o644);
    check(Browser::Chrome, &["manifest.path_not_executable"]);
    chmod(launcher, 0o755);
    chmod(&sandbox.binary, 0o644);
    check(Browser::Chrome, &["manifest.path_not_executable"]);
    chmod(&sandbox.binary, 0o755);
    check(Browser::Chrome, &[]);

    let ff = std::fs::read_to_string(&firefox.manifest_path).expect("read");
    put(
        &firefox.manifest_path,
        ff.replace(FIREFOX_ID, "not-an-addon-id").as_bytes(),
    );
    check(
        Browser::Firefox,
        &[
            "manifest.extension_id_invalid",
            "manifest.extension_not_allowed",
        ],
    );
    put(
        &firefox.manifest_path,
        ff.replace("allowed_extensions", "allowed_origins")
            .as_bytes(),
    );
    check(
        Browser::Firefox,
        &[
            "manifest.allowlist_mixed",
            "manifest.allowlist_missing",
            "manifest.extension_not_allowed",
        ],
    );
    std::fs::remove_file(launcher).expect("rm");
    check(Browser::Chrome, &["manifest.path_missing"]);
}

#[test]
#[cfg(target_endian = "little")]
fn hello_probe_reads_the_reply_or_says_why_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("good host");
    // A 16-byte little-endian length, then {"type":"hello"} (16 bytes); then wait to be killed.
    std::fs::write(
        &good,
        "#!/bin/sh\nprintf '\\020\\000\\000\\000{\"type\":\"hello\"}'\nexec sleep 30\n",
    )
    .expect("write");
    chmod(&good, 0o755);
    let reply = doctor::probe_hello(
        &good,
        &["chrome-extension://x/".into()],
        Duration::from_secs(10),
    )
    .expect("hello");
    assert_eq!(reply["type"], "hello");

    let exits = dir.path().join("exits");
    std::fs::write(
        &exits,
        "#!/bin/sh\necho \"error: unrecognized subcommand 'native-host'\" >&2\nexit 2\n",
    )
    .expect("write");
    chmod(&exits, 0o755);
    let why = doctor::probe_hello(&exits, &[], Duration::from_secs(10))
        .expect_err("no hello")
        .to_string();
    assert!(
        why.contains("exited") && why.contains("unrecognized subcommand"),
        "{why}"
    );

    let silent = dir.path().join("silent");
    std::fs::write(&silent, "#!/bin/sh\nexec sleep 30\n").expect("write");
    chmod(&silent, 0o755);
    let why = doctor::probe_hello(&silent, &[], Duration::from_millis(300))
        .expect_err("no hello")
        .to_string();
    assert!(why.contains("no reply within 300 ms"), "{why}");

    let chatty = dir.path().join("chatty");
    std::fs::write(&chatty, "#!/bin/sh\necho 'starting up...'\nexec sleep 30\n").expect("write");
    chmod(&chatty, 0o755);
    let why = doctor::probe_hello(&chatty, &[], Duration::from_secs(10))
        .expect_err("garbage")
        .to_string();
    assert!(why.contains("over the 1 MiB cap"), "{why}");
}
