//! Checking installed registrations the way the browser will, down to starting the host and
//! exchanging `hello` (DESIGN §4). The daemon check lives with the CLI, which has the HTTP client.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::browser::{Browser, Family, Os, Scope};
use crate::error::InstallerError;
use crate::ids::ExtensionIds;
use crate::launcher;
use crate::manifest::{self, Problem};
use crate::plan::{Environment, Location, locations};
use crate::registry;

/// What [`inspect`] checks.
#[derive(Debug, Clone)]
pub struct DoctorOptions<'a> {
    /// The browsers whose locations are inspected.
    pub browsers: &'a [Browser],
    /// The scopes inspected (usually both).
    pub scopes: &'a [Scope],
    /// Ids that must be allowed (from `--extension-id` and the defaults); a family with none is
    /// not checked for them.
    pub expected: &'a ExtensionIds,
    /// Start the host and exchange `hello` ([`probe_hello`]).
    pub probe_host: bool,
    /// How long the host gets to answer `hello`.
    pub hello_timeout: Duration,
}

/// The outcome for one installed manifest.
#[derive(Debug, Clone)]
pub struct ManifestReport {
    /// Where it was found.
    pub location: Location,
    /// The manifest file actually read (on Windows: the one the registry key names).
    pub manifest_path: PathBuf,
    /// Everything wrong with it; empty means the browser will start the host and it answered.
    pub problems: Vec<Problem>,
    /// The host's `hello` reply, when it was probed and answered.
    pub hello: Option<Value>,
}

/// Inspect every location of the selected browsers and scopes that holds a manifest (a file;
/// on Windows, a registry key), returning one report each. Locations with nothing installed are
/// skipped, so an empty result means "not installed anywhere".
///
/// Checks, in order: [`manifest::check`] (BOM, JSON, name, type, path absolute, allowlist kind
/// and entry format); the expected ids are allowed; `path` exists, is a regular file and is
/// executable; when `path` is our launcher, the binary it runs exists and is executable; then,
/// if nothing above failed and `probe_host` is set, that the host answers `hello`
/// ([`probe_hello`], started with the browser's argv for the first allowed extension).
///
/// # Errors
/// What [`locations`] returns; I/O problems with a manifest become [`Problem`]s, not errors.
pub fn inspect(
    env: &Environment,
    options: &DoctorOptions<'_>,
) -> Result<Vec<ManifestReport>, InstallerError> {
    let mut reports = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &scope in options.scopes {
        for location in locations(env, options.browsers, scope)? {
            let mut problems = Vec::new();
            let mut manifest_path = location.manifest_path.clone();
            if let Some(key) = &location.registry {
                match registry::get_default(key) {
                    Ok(Some(value)) => manifest_path = PathBuf::from(value),
                    Ok(None) => continue,
                    Err(e) => {
                        problems.push(Problem::new(
                            "manifest.registry_unreadable",
                            e.to_string(),
                            e.remediation(),
                        ));
                    }
                }
            }
            if !seen.insert((
                location.browser.family(),
                manifest_path.clone(),
                location.registry.clone(),
            )) {
                continue;
            }
            let bytes = match std::fs::read(&manifest_path) {
                Ok(bytes) => bytes,
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound && location.registry.is_none() =>
                {
                    continue;
                }
                Err(e) => {
                    problems.push(Problem::new(
                        "manifest.unreadable",
                        format!("cannot read {}: {e}", manifest_path.display()),
                        reinstall(&location),
                    ));
                    reports.push(ManifestReport {
                        location,
                        manifest_path,
                        problems,
                        hello: None,
                    });
                    continue;
                }
            };
            let report = inspect_one(env, options, location, manifest_path, &bytes, problems);
            reports.push(report);
        }
    }
    Ok(reports)
}

/// The command that fixes most problems at `location`.
fn reinstall(location: &Location) -> String {
    let system = if location.scope == Scope::System {
        " --system"
    } else {
        ""
    };
    format!(
        "run `review-agent-gateway install --browser {}{system}`",
        location.browser
    )
}

fn inspect_one(
    env: &Environment,
    options: &DoctorOptions<'_>,
    location: Location,
    manifest_path: PathBuf,
    bytes: &[u8],
    mut problems: Vec<Problem>,
) -> ManifestReport {
    let family = location.family();
    let fix = reinstall(&location);
    let (parsed, found) =
        manifest::check(bytes, family, crate::HOST_NAME, env.os != Os::Windows, &fix);
    problems.extend(found);
    let mut hello = None;
    let Some(parsed) = parsed else {
        return ManifestReport {
            location,
            manifest_path,
            problems,
            hello,
        };
    };
    let allowed: Vec<String> = parsed
        .get(manifest::allowlist_key(family))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for expected in options.expected.allowlist(family) {
        if !allowed.contains(&expected) {
            problems.push(Problem::new(
                "manifest.extension_not_allowed",
                format!(
                    "{} is not in {}: that extension will be refused (\"Access to the specified native messaging host is forbidden\")",
                    expected,
                    manifest::allowlist_key(family)
                ),
                format!("{fix} --extension-id {}", expected.trim_start_matches("chrome-extension://").trim_end_matches('/')),
            ));
        }
    }
    let host_path = parsed
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if problems.iter().any(|p| p.code.starts_with("manifest.path")) || host_path.is_empty() {
        return ManifestReport {
            location,
            manifest_path,
            problems,
            hello,
        };
    }
    let host = resolve_host_path(env, &manifest_path, host_path);
    let before = problems.len();
    check_executable(&host, "`path`", &fix, &mut problems);
    if problems.len() == before
        && let Ok(script) = std::fs::read_to_string(&host)
        && let Some(binary) = launcher::binary_of(&script)
    {
        check_executable(
            Path::new(&binary),
            "the binary the launcher runs",
            &fix,
            &mut problems,
        );
    }
    if options.probe_host && problems.is_empty() {
        let args = browser_args(family, &manifest_path, &allowed);
        match probe_hello(&host, &args, options.hello_timeout) {
            Ok(reply) => hello = Some(reply),
            // The host said what is wrong (e.g. `config.invalid` naming the line): report that,
            // not a generic failure.
            Err(HelloFailure::HostError {
                code,
                message,
                remediation,
            }) => problems.push(Problem::new(
                code,
                format!("the host answered hello with an error: {message}"),
                remediation,
            )),
            Err(HelloFailure::Other(why)) => problems.push(Problem::new(
                "host.no_hello",
                format!("host did not answer hello: {why}"),
                "Check that the binary has the `native-host` subcommand (a current build), and its log under the state dir; then re-run `review-agent-gateway install`.",
            )),
        }
    }
    ManifestReport {
        location,
        manifest_path,
        problems,
        hello,
    }
}

/// On Windows a relative `path` is relative to the manifest's directory.
fn resolve_host_path(env: &Environment, manifest_path: &Path, host_path: &str) -> PathBuf {
    let path = PathBuf::from(host_path);
    if env.os == Os::Windows && !path.is_absolute() {
        manifest_path
            .parent()
            .map_or(path.clone(), |dir| dir.join(&path))
    } else {
        path
    }
}

fn check_executable(path: &Path, what: &str, fix: &str, problems: &mut Vec<Problem>) {
    match std::fs::metadata(path) {
        Err(e) => problems.push(Problem::new(
            "manifest.path_missing",
            format!("{what} {} cannot be used: {e}", path.display()),
            format!("Install the binary there, or {fix} from the installed binary."),
        )),
        Ok(meta) if !meta.is_file() => problems.push(Problem::new(
            "manifest.path_not_executable",
            format!("{what} {} is not a regular file", path.display()),
            format!("{fix}."),
        )),
        Ok(meta) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if meta.permissions().mode() & 0o111 == 0 {
                    problems.push(Problem::new(
                        "manifest.path_not_executable",
                        format!("{what} {} is not executable", path.display()),
                        format!("Run `chmod +x '{}'`, or {fix}.", path.display()),
                    ));
                }
            }
            #[cfg(not(unix))]
            let _ = meta;
        }
    }
}

/// The argv (after the program) a browser of `family` starts the host with: Chrome-family the
/// first allowed origin; Firefox-family the manifest path and the first allowed add-on id.
pub fn browser_args(family: Family, manifest_path: &Path, allowed: &[String]) -> Vec<String> {
    let first = allowed.first().cloned().unwrap_or_default();
    match family {
        Family::Chromium => vec![first],
        Family::Firefox => vec![manifest_path.display().to_string(), first],
    }
}

/// The largest reply frame [`probe_hello`] accepts (the host→browser cap, DESIGN §4).
pub const MAX_REPLY: u32 = 1024 * 1024;

/// Why [`probe_hello`] got no `hello`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloFailure {
    /// The host answered with an `error` frame (DESIGN §4): its error object, as the host
    /// said it (e.g. `config.invalid` with the file and line, or `gateway.unavailable`).
    HostError {
        /// The dotted code.
        code: String,
        /// What went wrong.
        message: String,
        /// What to do about it.
        remediation: String,
    },
    /// Anything else: a sentence saying what happened instead (it could not be started, it
    /// exited, it answered something else or an oversized/garbled frame, or the timeout
    /// passed).
    Other(String),
}

impl std::fmt::Display for HelloFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HelloFailure::HostError { code, message, .. } => {
                write!(f, "it answered error[{code}]: {message}")
            }
            HelloFailure::Other(why) => f.write_str(why),
        }
    }
}

/// Start `program args...` as a browser would (stdin/stdout pipes), send a `hello` frame
/// (`{"type":"hello","protocolVersions":["1.0"]}`, 32-bit native-endian length + UTF-8 JSON) and
/// wait up to `timeout` for a frame of type `hello` or `error`. The process is killed afterwards.
///
/// # Errors
/// [`HelloFailure::HostError`] when the host answered an `error` frame (its code, message and
/// remediation); [`HelloFailure::Other`] otherwise.
pub fn probe_hello(
    program: &Path,
    args: &[String],
    timeout: Duration,
) -> Result<Value, HelloFailure> {
    probe(program, args, timeout).map_err(|why| match why {
        Probe::Frame(reply) => host_error(&reply).unwrap_or_else(|| {
            HelloFailure::Other(format!("it answered {reply} instead of a hello frame"))
        }),
        Probe::Other(why) => HelloFailure::Other(why),
    })
}

/// The error object of an `error` frame, if `reply` is one with a code.
fn host_error(reply: &Value) -> Option<HelloFailure> {
    if reply.get("type").and_then(Value::as_str) != Some("error") {
        return None;
    }
    let error = reply.get("error")?;
    let text = |key: &str| error.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(HelloFailure::HostError {
        code: text("code")?,
        message: text("message").unwrap_or_default(),
        remediation: text("remediation").unwrap_or_default(),
    })
}

enum Probe {
    Frame(Value),
    Other(String),
}

fn probe(program: &Path, args: &[String], timeout: Duration) -> Result<Value, Probe> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Probe::Other(format!("cannot start {}: {e}", program.display())))?;
    let body = json!({"type": "hello", "protocolVersions": ["1.0"]}).to_string();
    let len = u32::try_from(body.len()).expect("the hello frame is small");
    let mut frame = len.to_ne_bytes().to_vec();
    frame.extend_from_slice(body.as_bytes());
    // Keep stdin open until we are done: EOF means "the browser went away" to the host.
    let mut stdin = child.stdin.take();
    if let Some(pipe) = stdin.as_mut() {
        // A host that exits at once closes the pipe; the read below reports that.
        let _ = pipe.write_all(&frame).and_then(|()| pipe.flush());
    }
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read_frame(&mut stdout));
    });
    let (etx, erx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut buf);
        let _ = etx.send(buf);
    });
    let outcome = rx.recv_timeout(timeout);
    drop(stdin);
    let _ = child.kill();
    let status = child.wait().ok();
    let stderr_tail = || {
        let bytes = erx
            .recv_timeout(Duration::from_millis(500))
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let joined = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" / ");
        let tail: String = joined.chars().take(300).collect();
        if tail.is_empty() {
            String::new()
        } else {
            format!("; stderr: {tail}")
        }
    };
    match outcome {
        Err(_) => Err(Probe::Other(format!(
            "no reply within {} ms",
            timeout.as_millis()
        ))),
        Ok(Err(ReadError::Eof)) => Err(Probe::Other(format!(
            "it exited ({}) before answering{}",
            status.map_or_else(|| "status unknown".into(), |s| s.to_string()),
            stderr_tail()
        ))),
        Ok(Err(ReadError::Bad(why))) => Err(Probe::Other(why)),
        Ok(Ok(reply)) if reply.get("type").and_then(Value::as_str) == Some("hello") => Ok(reply),
        Ok(Ok(reply)) => Err(Probe::Frame(reply)),
    }
}

enum ReadError {
    Eof,
    Bad(String),
}

fn read_frame(reader: &mut impl Read) -> Result<Value, ReadError> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len).map_err(|_| ReadError::Eof)?;
    let len = u32::from_ne_bytes(len);
    if len > MAX_REPLY {
        return Err(ReadError::Bad(format!(
            "it sent a frame of {len} bytes (over the 1 MiB cap) — is something else writing to stdout?"
        )));
    }
    let mut body = vec![0u8; len as usize];
    reader.read_exact(&mut body).map_err(|_| ReadError::Eof)?;
    serde_json::from_slice(&body).map_err(|e| ReadError::Bad(format!("its reply is not JSON: {e}")))
}
