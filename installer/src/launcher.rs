//! How the browser's start of the host reaches `review-agent-gateway native-host`.
//!
//! Browsers start the manifest's `path` with their own argv: Chrome-family browsers pass the
//! caller origin `chrome-extension://ID/` (plus `--parent-window=N` on Windows), Firefox-family
//! ones the manifest path and the add-on id. Our binary needs the `native-host` subcommand first.
//!
//! - **Linux and macOS**: the manifest points at a launcher script written next to it,
//!   [`LAUNCHER_FILE_NAME`], that `exec`s `<binary> native-host "$@"`. The binary path is
//!   single-quoted for `sh` (any byte but NUL survives, spaces and non-ASCII included). In a
//!   Flatpak sandbox location the launcher runs the host outside the sandbox with
//!   `flatpak-spawn --host` (the browser needs `--talk-name=org.freedesktop.Flatpak`, which
//!   `install` tells the user how to grant).
//! - **Windows**: a `.bat`/`.cmd` launcher would go through `cmd.exe`, whose parsing and code
//!   page mangle paths with `%`, `^` or non-ASCII characters. So the manifest points at the
//!   binary itself and the binary recognises a browser start ([`browser_invocation`]) before
//!   parsing its command line.

use std::ffi::OsString;

/// The launcher's file name (next to the manifest, Linux and macOS).
pub const LAUNCHER_FILE_NAME: &str = "review-agent-gateway-native-host";

/// A line every launcher we write contains; `uninstall` removes only launchers that have it.
pub const LAUNCHER_MARKER: &str = "# review-agent-gateway native messaging launcher";

/// Quote `text` for POSIX `sh` as one word: `'...'` with each `'` written `'\''`.
pub fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The launcher script for `binary` (an absolute path). With `flatpak`, it runs the binary on
/// the host through `flatpak-spawn --host` when started inside a sandbox (`/.flatpak-info`
/// exists), directly otherwise. With `gateway_home` (the `REVIEW_AGENT_GATEWAY_HOME` of the
/// `install`), the host gets that variable too: a browser started from a desktop session does
/// not have the installing shell's environment, and would otherwise use the default home.
pub fn render(binary: &str, flatpak: bool, gateway_home: Option<&str>) -> String {
    let quoted = sh_quote(binary);
    let mut script = format!(
        "#!/bin/sh\n{LAUNCHER_MARKER} for {host}.\n\
         # Written by `review-agent-gateway install`; removed by `review-agent-gateway uninstall`.\n\
         # The browser passes the caller (an origin, or a manifest path and an add-on id).\n",
        host = crate::HOST_NAME
    );
    let mut spawn_env = String::new();
    if let Some(home) = gateway_home {
        let home = sh_quote(home);
        script.push_str(&format!(
            "REVIEW_AGENT_GATEWAY_HOME={home}\nexport REVIEW_AGENT_GATEWAY_HOME\n"
        ));
        spawn_env = " --env=REVIEW_AGENT_GATEWAY_HOME=\"$REVIEW_AGENT_GATEWAY_HOME\"".to_owned();
    }
    if flatpak {
        script.push_str(&format!(
            "if [ -e /.flatpak-info ]; then\n  exec flatpak-spawn --host{spawn_env} {quoted} native-host \"$@\"\nfi\n"
        ));
    }
    script.push_str(&format!("exec {quoted} native-host \"$@\"\n"));
    script
}

/// The binary path a launcher written by [`render`] runs, or `None` if `script` is not ours.
pub fn binary_of(script: &str) -> Option<String> {
    if !script.contains(LAUNCHER_MARKER) {
        return None;
    }
    let line = script.lines().rev().find(|l| l.starts_with("exec '"))?;
    let quoted = line
        .strip_prefix("exec ")?
        .strip_suffix(" native-host \"$@\"")?;
    // Undo sh_quote: '...' pieces joined by \'.
    let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
    Some(inner.replace(r"'\''", "'"))
}

/// If `args` (the full argv, program first) is a browser starting the host — argv\[1\] is
/// `chrome-extension://...`, or argv\[1\] is a path ending in `.json` followed by an add-on id and
/// nothing else — the argv to parse instead: `native-host` inserted after the program.
/// `None` for an ordinary command line. Used on Windows, where the manifest names the binary.
pub fn browser_invocation(args: &[OsString]) -> Option<Vec<OsString>> {
    let first = args.get(1)?.to_str()?;
    let chrome = first.starts_with("chrome-extension://");
    let firefox = args.len() == 3
        && first.to_ascii_lowercase().ends_with(".json")
        && args[2]
            .to_str()
            .is_some_and(crate::ids::is_firefox_extension_id);
    if !chrome && !firefox {
        return None;
    }
    let mut out = Vec::with_capacity(args.len() + 1);
    out.push(args[0].clone());
    out.push(OsString::from("native-host"));
    out.extend(args[1..].iter().cloned());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_round_trips() {
        for path in [
            "/usr/bin/x",
            "/home/a b/it's/ré 日本/bin",
            "/x/'$(rm -rf)'`\\\"/y",
        ] {
            let script = render(path, false, None);
            assert_eq!(binary_of(&script).as_deref(), Some(path), "{script}");
            assert_eq!(binary_of(&render(path, true, None)).as_deref(), Some(path));
            assert_eq!(
                binary_of(&render(path, true, Some("/h o'me"))).as_deref(),
                Some(path)
            );
        }
        assert_eq!(binary_of("#!/bin/sh\nexec '/x' native-host \"$@\"\n"), None);
    }

    #[test]
    fn browser_starts_are_recognised() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let chrome = os(&["gw.exe", "chrome-extension://abc/", "--parent-window=0"]);
        assert_eq!(
            browser_invocation(&chrome),
            Some(os(&[
                "gw.exe",
                "native-host",
                "chrome-extension://abc/",
                "--parent-window=0"
            ]))
        );
        let firefox = os(&["gw.exe", r"C:\m\com.review_agent.gateway.json", "a@b"]);
        assert_eq!(browser_invocation(&firefox).map(|v| v.len()), Some(4));
        assert_eq!(
            browser_invocation(&os(&["gw.exe", "review", "--base", "x"])),
            None
        );
        assert_eq!(
            browser_invocation(&os(&["gw.exe", "x.json", "not an id"])),
            None
        );
        assert_eq!(browser_invocation(&os(&["gw.exe"])), None);
    }
}
