//! The local token file (DESIGN §9; issue 3 part 8): created 0600, refused when others may read
//! it, rotated atomically, compared in constant time, never printed by `Debug`.

use std::path::Path;

use review_agent_gateway::GatewayError;
use review_agent_gateway::security::{SecurityError, Token, bearer_token};

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn created_once_with_mode_0600_then_reused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state").join("token");
    let first = Token::load_or_create(&path).expect("create");
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o600);
    let text = std::fs::read_to_string(&path).expect("read");
    assert_eq!(text, format!("{}\n", first.expose_secret()));
    let second = Token::load_or_create(&path).expect("load");
    assert_eq!(first.expose_secret(), second.expose_secret());
    assert_eq!(
        Token::load(&path).expect("load").expose_secret(),
        first.expose_secret()
    );
    // Only the token file is left in the directory (no temporary files).
    let names: Vec<_> = std::fs::read_dir(path.parent().expect("parent"))
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["token"]);
}

#[cfg(unix)]
#[test]
fn refused_when_others_may_read_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("token");
    Token::load_or_create(&path).expect("create");
    for bad in [0o644, 0o640, 0o604, 0o620, 0o660] {
        chmod(&path, bad);
        let err = Token::load_or_create(&path).expect_err("refused");
        assert!(
            matches!(err, SecurityError::TokenFilePermissions { mode, .. } if mode == bad),
            "{err}"
        );
        let shown = err.to_string();
        let gateway = GatewayError::from(err);
        assert_eq!(gateway.code, "security.token_file_permissions");
        assert!(
            gateway.remediation.contains("chmod 600"),
            "{}",
            gateway.remediation
        );
        assert!(shown.contains(&format!("{bad:04o}")), "{shown}");
        assert!(Token::load(&path).is_err());
    }
    chmod(&path, 0o400);
    Token::load(&path).expect("0400 is fine");
}

#[cfg(unix)]
#[test]
fn symlinks_and_directories_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real");
    Token::load_or_create(&real).expect("create");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    assert!(matches!(
        Token::load_or_create(&link),
        Err(SecurityError::TokenFileInvalid { .. })
    ));
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).expect("mkdir");
    assert!(Token::load_or_create(&sub).is_err());
}

#[test]
fn unusable_contents_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("token");
    for contents in [
        "",
        "\n",
        "short\n",
        &format!("{} {}\n", "a".repeat(20), "b".repeat(20)),
    ] {
        std::fs::write(&path, contents).expect("write");
        #[cfg(unix)]
        chmod(&path, 0o600);
        let err = Token::load_or_create(&path).expect_err("invalid");
        assert!(
            matches!(err, SecurityError::TokenFileInvalid { .. }),
            "{err}"
        );
        assert_eq!(GatewayError::from(err).code, "security.token_file_invalid");
    }
    // A hand-written token of another form is accepted.
    std::fs::write(&path, "my-own_token.0123456789abcdefghijklmnop\r\n").expect("write");
    let token = Token::load(&path).expect("valid");
    assert!(token.verify("my-own_token.0123456789abcdefghijklmnop"));
}

#[test]
fn rotate_replaces_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("token");
    let old = Token::load_or_create(&path).expect("create");
    let new = Token::rotate(&path).expect("rotate");
    assert_ne!(old.expose_secret(), new.expose_secret());
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o600);
    let loaded = Token::load(&path).expect("load");
    assert!(loaded.verify(new.expose_secret()));
    assert!(!loaded.verify(old.expose_secret()));
    // Rotating a group-readable file fixes it.
    #[cfg(unix)]
    {
        chmod(&path, 0o644);
        Token::rotate(&path).expect("rotate");
        assert_eq!(mode(&path), 0o600);
    }
}

#[test]
fn verify_and_redaction() {
    let token = Token::generate().expect("random");
    let secret = token.expose_secret().to_owned();
    assert!(token.verify(&secret));
    let mut wrong_last = secret.clone().into_bytes();
    let last = wrong_last.len() - 1;
    wrong_last[last] = if wrong_last[last] == b'0' { b'1' } else { b'0' };
    let wrong_last = String::from_utf8(wrong_last).expect("ascii");
    for presented in [
        "",
        "x",
        &secret[..32],
        &wrong_last,
        &format!("{secret}0"),
        &secret.to_uppercase(),
    ] {
        assert!(!token.verify(presented), "{presented}");
    }
    assert_eq!(format!("{token:?}"), "Token(<redacted>)");
    assert!(!format!("{:?}", Some(&token)).contains(&secret));

    // Header to verification, as a transport does it.
    let header = format!("Bearer {secret}");
    assert!(bearer_token(Some(&header)).is_some_and(|t| token.verify(t)));
    assert!(!bearer_token(Some("Bearer ")).is_some_and(|t| token.verify(t)));
}

#[test]
fn concurrent_creators_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("token");
    let tokens: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    Token::load_or_create(&path)
                        .expect("token")
                        .expose_secret()
                        .to_owned()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(tokens.windows(2).all(|w| w[0] == w[1]), "{tokens:?}");
}
