//! A private D-Bus session bus with GNOME Keyring's Secret Service on it, for the tests of
//! model API keys in the OS keyring (`providers_keys.rs`, `settings_pages.rs`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private D-Bus session bus with GNOME Keyring's Secret Service on it, unlocked; both
/// processes are killed on drop. The bus has no service directories, so nothing else is
/// activated on it.
pub struct SecretService {
    dir: tempfile::TempDir,
    /// The bus address, for `DBUS_SESSION_BUS_ADDRESS`.
    pub address: String,
    bus: Child,
    keyring: Child,
}

impl SecretService {
    pub fn start() -> SecretService {
        for program in [
            "dbus-daemon",
            "dbus-send",
            "gnome-keyring-daemon",
            "secret-tool",
        ] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {program}")])
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success()),
                "{program} is missing: install Debian's dbus-daemon, dbus-bin, gnome-keyring and \
                 libsecret-tools (.ci/run does)"
            );
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("bus");
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                socket.display()
            ),
        )
        .expect("bus config");
        let mut bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-daemon");
        let mut address = String::new();
        BufReader::new(bus.stdout.take().expect("stdout"))
            .read_line(&mut address)
            .expect("bus address");
        let address = address.trim().to_owned();
        assert!(address.starts_with("unix:"), "bus address {address:?}");

        let keyring_home = dir.path().join("home");
        let runtime = dir.path().join("run");
        for d in [&keyring_home, &runtime] {
            std::fs::create_dir_all(d).expect("dir");
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
            }
        }
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--components=secrets", "--unlock"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &keyring_home)
            .env("XDG_DATA_HOME", keyring_home.join("data"))
            .env("XDG_CONFIG_HOME", keyring_home.join("config"))
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gnome-keyring-daemon");
        // --unlock: the login keyring's password on stdin (created with it on first start).
        let mut stdin = keyring.stdin.take().expect("stdin");
        stdin.write_all(b"test-password").expect("password");
        drop(stdin);
        let service = SecretService {
            dir,
            address,
            bus,
            keyring,
        };
        service.wait_until_ready();
        service
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = self
                .tool("dbus-send")
                .args([
                    "--session",
                    "--print-reply",
                    "--dest=org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.NameHasOwner",
                    "string:org.freedesktop.secrets",
                ])
                .output()
                .expect("dbus-send");
            if String::from_utf8_lossy(&out.stdout).contains("boolean true") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "gnome-keyring-daemon did not take org.freedesktop.secrets within 10 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A command on this bus (dbus-send, secret-tool).
    pub fn tool(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .stdin(Stdio::null());
        cmd
    }

    /// What the keyring holds for the gateway's provider `id` (`secret-tool lookup`).
    pub fn lookup(&self, id: &str) -> Option<String> {
        let out = self
            .tool("secret-tool")
            .args(["lookup", "service", "review-agent-gateway", "username", id])
            .output()
            .expect("secret-tool");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Store an item as another program would (`secret-tool store`).
    pub fn plant(&self, id: &str, secret: &str) {
        let mut child = self
            .tool("secret-tool")
            .args([
                "store",
                "--label=planted",
                "service",
                "review-agent-gateway",
                "username",
                id,
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("secret-tool");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(secret.as_bytes())
            .expect("secret");
        assert!(child.wait().expect("wait").success());
    }

    /// Lock every collection (as a screen lock would).
    pub fn lock(&self) {
        let out = self
            .tool("dbus-send")
            .args([
                "--session",
                "--print-reply",
                "--dest=org.freedesktop.secrets",
                "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service.Lock",
                "array:objpath:/org/freedesktop/secrets/collection/login",
            ])
            .output()
            .expect("dbus-send");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        let _ = self.keyring.kill();
        let _ = self.keyring.wait();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}
