//! Where each browser reads host manifests, as a pure function of an [`Environment`]
//! (DESIGN §11), and the [`Target`]s an install writes there.
//!
//! Sources for the locations (checked when this was written):
//! - Chrome / Chromium: developer.chrome.com, "Native messaging", "Native messaging host location"
//!   (Linux `/etc/opt/chrome/native-messaging-hosts`, `~/.config/google-chrome/NativeMessagingHosts`,
//!   `/etc/chromium/...`, `~/.config/chromium/...`; macOS `/Library/Google/Chrome/...`,
//!   `~/Library/Application Support/Google/Chrome/...`, `.../Chromium/...`; Windows
//!   `HKCU|HKLM\Software\Google\Chrome\NativeMessagingHosts\<name>`, `...\Chromium\...`).
//!   Chrome honours `$XDG_CONFIG_HOME` for its config dir.
//! - Edge: learn.microsoft.com, "Native messaging" (Windows `Software\Microsoft\Edge\...`;
//!   macOS `/Library/Microsoft/Edge/NativeMessagingHosts`,
//!   `~/Library/Application Support/Microsoft Edge/NativeMessagingHosts`; Linux
//!   `/etc/opt/edge/native-messaging-hosts`, `~/.config/microsoft-edge/NativeMessagingHosts`).
//! - Firefox: MDN, "Native manifests", "Manifest location" (Linux `~/.mozilla/native-messaging-hosts`,
//!   `/usr/lib/mozilla/...` and `/usr/lib64/mozilla/...`; macOS
//!   `~/Library/Application Support/Mozilla/NativeMessagingHosts`, `/Library/Application Support/Mozilla/...`;
//!   Windows `HKCU|HKLM\SOFTWARE\Mozilla\NativeMessagingHosts\<name>`).
//! - Brave, Vivaldi, LibreWolf publish no reference; we follow what working hosts use
//!   (KeePassXC `NativeMessageInstaller.cpp`, browserpass, vdhcoapp): Brave
//!   `~/.config/BraveSoftware/Brave-Browser`, Vivaldi `~/.config/vivaldi`, LibreWolf `~/.librewolf`
//!   (its patch renames `.mozilla`); on Windows Brave and Vivaldi read Chrome's key, LibreWolf
//!   `Software\LibreWolf`. System-wide, Brave is given Chrome's directory and Vivaldi Chromium's
//!   (browserpass); these two are the least certain entries.
//! - Flatpak: a sandboxed browser sees only its own `~/.var/app/<app-id>` tree, where its
//!   `$XDG_CONFIG_HOME` is `~/.var/app/<app-id>/config` (Chrome family) and its home-relative
//!   dot directories live (`.mozilla`, `.librewolf`). We write there only when the Flatpak is
//!   installed ([`Environment::flatpaks`]), and only for the user scope.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::browser::{Browser, Family, Os, Scope};
use crate::error::InstallerError;
use crate::ids::ExtensionIds;
use crate::launcher;
use crate::manifest;

/// What the plan depends on: the OS, the user's directories and what is installed.
/// Build it with [`Environment::detect`] or by hand (tests, other OSes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// The OS whose conventions apply.
    pub os: Os,
    /// The user's home directory (`$HOME`; `%USERPROFILE%` on Windows).
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` if set and absolute (Linux; Chrome-family browsers honour it).
    pub xdg_config_home: Option<PathBuf>,
    /// Prefix of system-wide paths on Linux and macOS: `/` normally; a temporary directory in
    /// tests so `--system` never touches the real `/etc`.
    pub root: PathBuf,
    /// `%LOCALAPPDATA%` (Windows, user scope: where manifest files go).
    pub local_app_data: Option<PathBuf>,
    /// `%ProgramData%` (Windows, system scope: where manifest files go).
    pub program_data: Option<PathBuf>,
    /// Flatpak application ids installed for this user or system-wide (Linux).
    pub flatpaks: BTreeSet<String>,
    /// Whether `<root>/usr/lib64` exists (Linux distributions whose Firefox reads
    /// `/usr/lib64/mozilla/native-messaging-hosts`).
    pub has_lib64: bool,
    /// `$REVIEW_AGENT_GATEWAY_HOME` of the install, if set and absolute: the launcher passes
    /// it on to the host (Linux and macOS).
    pub gateway_home: Option<PathBuf>,
}

impl Environment {
    /// The current machine: [`Os::current`], `$HOME` / `%USERPROFILE%`, `$XDG_CONFIG_HOME`,
    /// `%LOCALAPPDATA%`, `%ProgramData%`, and the installed Flatpaks ([`detect_flatpaks`]).
    /// `root` replaces `/` for system-wide paths (`None`: the real `/`).
    ///
    /// # Errors
    /// [`InstallerError::MissingEnvironment`] when no home directory is set.
    pub fn detect(root: Option<&Path>) -> Result<Environment, InstallerError> {
        let os = Os::current();
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = match os {
            Os::Windows => var("USERPROFILE").or_else(|| var("HOME")),
            _ => var("HOME"),
        }
        .ok_or(InstallerError::MissingEnvironment {
            what: "the home directory",
            hint: "HOME (USERPROFILE on Windows)",
        })?;
        let root = root.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
        let flatpaks = if os == Os::Linux {
            detect_flatpaks(&home, &root)
        } else {
            BTreeSet::new()
        };
        Ok(Environment {
            os,
            xdg_config_home: var("XDG_CONFIG_HOME").filter(|p| p.is_absolute()),
            local_app_data: var("LOCALAPPDATA"),
            program_data: var("ProgramData").or_else(|| var("PROGRAMDATA")),
            has_lib64: root.join("usr/lib64").is_dir(),
            gateway_home: var("REVIEW_AGENT_GATEWAY_HOME").filter(|p| p.is_absolute()),
            home,
            root,
            flatpaks,
        })
    }
}

/// The Flatpak app ids of our browsers that are installed: `~/.var/app/<id>` (created on first
/// run), `~/.local/share/flatpak/app/<id>` (user installation) or
/// `<root>/var/lib/flatpak/app/<id>` (system installation) exists.
pub fn detect_flatpaks(home: &Path, root: &Path) -> BTreeSet<String> {
    Browser::ALL
        .iter()
        .map(|b| b.flatpak_app_id())
        .filter(|id| {
            home.join(".var/app").join(id).is_dir()
                || home.join(".local/share/flatpak/app").join(id).is_dir()
                || root.join("var/lib/flatpak/app").join(id).is_dir()
        })
        .map(str::to_owned)
        .collect()
}

/// A Windows registry hive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hive {
    /// `HKEY_CURRENT_USER` (user scope).
    CurrentUser,
    /// `HKEY_LOCAL_MACHINE` (system scope).
    LocalMachine,
}

/// A registry key whose default value is the manifest path (Windows).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegistryKey {
    /// The hive.
    pub hive: Hive,
    /// The key below the hive, e.g. `Software\Google\Chrome\NativeMessagingHosts\com.review_agent.gateway`.
    pub key: String,
}

impl std::fmt::Display for RegistryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hive = match self.hive {
            Hive::CurrentUser => "HKEY_CURRENT_USER",
            Hive::LocalMachine => "HKEY_LOCAL_MACHINE",
        };
        write!(f, "{hive}\\{}", self.key)
    }
}

/// One place a browser looks for our host: the manifest file, the launcher next to it
/// (Linux/macOS) and, on Windows, the registry key pointing at the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The browser that reads it.
    pub browser: Browser,
    /// Its scope.
    pub scope: Scope,
    /// The Flatpak app id when this is a Flatpak sandbox location.
    pub flatpak: Option<&'static str>,
    /// `<dir>/com.review_agent.gateway.json`.
    pub manifest_path: PathBuf,
    /// `<dir>/review-agent-gateway-native-host` on Linux and macOS; `None` on Windows, where the
    /// manifest points at the binary itself (see [`crate::launcher`]).
    pub launcher_path: Option<PathBuf>,
    /// The registry key (Windows only).
    pub registry: Option<RegistryKey>,
}

impl Location {
    /// The manifest dialect at this location.
    pub fn family(&self) -> Family {
        self.browser.family()
    }

    /// `chrome (user)`, `chromium (user, flatpak org.chromium.Chromium)`, for messages.
    pub fn label(&self) -> String {
        match self.flatpak {
            Some(app) => format!("{} ({}, flatpak {app})", self.browser, self.scope.as_str()),
            None => format!("{} ({})", self.browser, self.scope.as_str()),
        }
    }
}

/// Every location of `browsers` for `scope` under `env`, in [`Browser::ALL`] order, Flatpak
/// locations after the native one. Locations that coincide (Brave and Chrome system-wide on
/// Linux; Brave/Vivaldi and Chrome on Windows) are listed once per browser; writers dedupe by path.
///
/// # Errors
/// [`InstallerError::MissingEnvironment`] on Windows without `%LOCALAPPDATA%` (user) or
/// `%ProgramData%` (system).
pub fn locations(
    env: &Environment,
    browsers: &[Browser],
    scope: Scope,
) -> Result<Vec<Location>, InstallerError> {
    let mut out = Vec::new();
    for &browser in browsers {
        match env.os {
            Os::Linux => linux_locations(env, browser, scope, &mut out),
            Os::MacOs => {
                let dir = macos_dir(env, browser, scope);
                out.push(file_location(browser, scope, None, &dir));
            }
            Os::Windows => out.push(windows_location(env, browser, scope)?),
        }
    }
    Ok(out)
}

fn file_location(
    browser: Browser,
    scope: Scope,
    flatpak: Option<&'static str>,
    dir: &Path,
) -> Location {
    Location {
        browser,
        scope,
        flatpak,
        manifest_path: dir.join(crate::manifest_file_name()),
        launcher_path: Some(dir.join(launcher::LAUNCHER_FILE_NAME)),
        registry: None,
    }
}

/// `root` joined with an absolute system path.
fn system(env: &Environment, absolute: &str) -> PathBuf {
    env.root.join(absolute.trim_start_matches('/'))
}

fn linux_locations(env: &Environment, browser: Browser, scope: Scope, out: &mut Vec<Location>) {
    let config = env
        .xdg_config_home
        .clone()
        .unwrap_or_else(|| env.home.join(".config"));
    let chromium_subdir = |b: Browser| match b {
        Browser::Chrome => "google-chrome",
        Browser::Chromium => "chromium",
        Browser::Edge => "microsoft-edge",
        Browser::Brave => "BraveSoftware/Brave-Browser",
        _ => "vivaldi",
    };
    match scope {
        Scope::User => {
            let dir = match browser {
                Browser::Firefox => env.home.join(".mozilla/native-messaging-hosts"),
                Browser::Librewolf => env.home.join(".librewolf/native-messaging-hosts"),
                b => config.join(chromium_subdir(b)).join("NativeMessagingHosts"),
            };
            out.push(file_location(browser, scope, None, &dir));
            let app = browser.flatpak_app_id();
            if env.flatpaks.contains(app) {
                let sandbox = env.home.join(".var/app").join(app);
                let dir = match browser {
                    Browser::Firefox => sandbox.join(".mozilla/native-messaging-hosts"),
                    Browser::Librewolf => sandbox.join(".librewolf/native-messaging-hosts"),
                    b => sandbox
                        .join("config")
                        .join(chromium_subdir(b))
                        .join("NativeMessagingHosts"),
                };
                out.push(file_location(browser, scope, Some(app), &dir));
            }
        }
        Scope::System => {
            let dirs: &[&str] = match browser {
                Browser::Chrome | Browser::Brave => &["/etc/opt/chrome/native-messaging-hosts"],
                Browser::Chromium | Browser::Vivaldi => &["/etc/chromium/native-messaging-hosts"],
                Browser::Edge => &["/etc/opt/edge/native-messaging-hosts"],
                Browser::Firefox if env.has_lib64 => &[
                    "/usr/lib/mozilla/native-messaging-hosts",
                    "/usr/lib64/mozilla/native-messaging-hosts",
                ],
                Browser::Firefox => &["/usr/lib/mozilla/native-messaging-hosts"],
                Browser::Librewolf => &["/usr/lib/librewolf/native-messaging-hosts"],
            };
            for dir in dirs {
                out.push(file_location(browser, scope, None, &system(env, dir)));
            }
        }
    }
}

fn macos_dir(env: &Environment, browser: Browser, scope: Scope) -> PathBuf {
    let support = "Library/Application Support";
    let app = match browser {
        Browser::Chrome => "Google/Chrome",
        Browser::Chromium => "Chromium",
        Browser::Edge => "Microsoft Edge",
        Browser::Brave => "BraveSoftware/Brave-Browser",
        Browser::Vivaldi => "Vivaldi",
        Browser::Firefox => "Mozilla",
        Browser::Librewolf => "LibreWolf",
    };
    match (scope, browser) {
        (Scope::User, _) => env
            .home
            .join(support)
            .join(app)
            .join("NativeMessagingHosts"),
        (Scope::System, Browser::Chrome) => {
            system(env, "/Library/Google/Chrome/NativeMessagingHosts")
        }
        (Scope::System, Browser::Edge) => {
            system(env, "/Library/Microsoft/Edge/NativeMessagingHosts")
        }
        (Scope::System, _) => system(env, "/")
            .join(support)
            .join(app)
            .join("NativeMessagingHosts"),
    }
}

fn windows_location(
    env: &Environment,
    browser: Browser,
    scope: Scope,
) -> Result<Location, InstallerError> {
    let (base, hive) = match scope {
        Scope::User => (
            env.local_app_data
                .as_ref()
                .ok_or(InstallerError::MissingEnvironment {
                    what: "the local application data folder",
                    hint: "LOCALAPPDATA",
                })?,
            Hive::CurrentUser,
        ),
        Scope::System => (
            env.program_data
                .as_ref()
                .ok_or(InstallerError::MissingEnvironment {
                    what: "the program data folder",
                    hint: "ProgramData",
                })?,
            Hive::LocalMachine,
        ),
    };
    let vendor = match browser {
        Browser::Chrome | Browser::Brave | Browser::Vivaldi => r"Software\Google\Chrome",
        Browser::Chromium => r"Software\Chromium",
        Browser::Edge => r"Software\Microsoft\Edge",
        Browser::Firefox => r"Software\Mozilla",
        Browser::Librewolf => r"Software\LibreWolf",
    };
    let family_dir = match browser.family() {
        Family::Chromium => "chrome",
        Family::Firefox => "firefox",
    };
    // Windows separators whatever OS computes the plan.
    let manifest_path = PathBuf::from(format!(
        r"{}\review-agent-gateway\NativeMessagingHosts\{family_dir}\{}",
        base.display().to_string().trim_end_matches('\\'),
        crate::manifest_file_name()
    ));
    Ok(Location {
        browser,
        scope,
        flatpak: None,
        manifest_path,
        launcher_path: None,
        registry: Some(RegistryKey {
            hive,
            key: format!(r"{vendor}\NativeMessagingHosts\{}", crate::HOST_NAME),
        }),
    })
}

/// What an install writes at one [`Location`]: the manifest JSON and, on Linux and macOS, the
/// launcher script its `path` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Where.
    pub location: Location,
    /// The manifest object (see [`manifest::render`]).
    pub manifest: serde_json::Value,
    /// The launcher script text, when the location has a launcher.
    pub launcher: Option<String>,
}

/// What [`plan`] is asked for.
#[derive(Debug, Clone)]
pub struct InstallRequest<'a> {
    /// The browsers to register with.
    pub browsers: &'a [Browser],
    /// User or system-wide.
    pub scope: Scope,
    /// The extensions the manifests allow.
    pub ids: &'a ExtensionIds,
    /// The absolute path of the `review-agent-gateway` binary.
    pub host_binary: &'a Path,
}

/// The targets an install writes: one per [`locations`] entry, with the manifest for that
/// browser family and the launcher (Linux/macOS) that runs `<host_binary> native-host "$@"`.
/// On Windows the manifest `path` is `host_binary` itself (see [`crate::launcher`]).
///
/// # Errors
/// - [`InstallerError::MissingExtensionId`] when a selected family has no id in `ids`.
/// - [`InstallerError::RelativeBinary`] / [`InstallerError::NonUtf8Path`] for the binary path.
/// - what [`locations`] returns.
pub fn plan(
    env: &Environment,
    request: &InstallRequest<'_>,
) -> Result<Vec<Target>, InstallerError> {
    let binary_str = request
        .host_binary
        .to_str()
        .ok_or_else(|| InstallerError::NonUtf8Path(request.host_binary.to_path_buf()))?;
    let absolute = match env.os {
        Os::Windows => is_windows_absolute(binary_str),
        _ => binary_str.starts_with('/'),
    };
    if !absolute {
        return Err(InstallerError::RelativeBinary(
            request.host_binary.to_path_buf(),
        ));
    }
    for family in [Family::Chromium, Family::Firefox] {
        if request.browsers.iter().any(|b| b.family() == family)
            && request.ids.of(family).is_empty()
        {
            return Err(InstallerError::MissingExtensionId {
                family: family.label(),
            });
        }
    }
    let mut targets = Vec::new();
    for location in locations(env, request.browsers, request.scope)? {
        let (manifest_host_path, launcher) = match &location.launcher_path {
            Some(launcher_path) => {
                let gateway_home = env.gateway_home.as_deref().and_then(Path::to_str);
                let text = launcher::render(binary_str, location.flatpak.is_some(), gateway_home);
                let path = launcher_path
                    .to_str()
                    .ok_or_else(|| InstallerError::NonUtf8Path(launcher_path.clone()))?;
                (path.to_owned(), Some(text))
            }
            None => (binary_str.to_owned(), None),
        };
        let manifest = manifest::render(
            location.family(),
            &manifest_host_path,
            &request.ids.allowlist(location.family()),
        );
        targets.push(Target {
            location,
            manifest,
            launcher,
        });
    }
    Ok(targets)
}

/// `C:\...`, `C:/...` or `\\server\share\...`.
fn is_windows_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    (bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && (bytes[2] == b'\\' || bytes[2] == b'/'))
        || path.starts_with(r"\\")
}
