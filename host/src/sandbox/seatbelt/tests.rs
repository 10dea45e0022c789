//! Tests of the Seatbelt rendering. They read the profile back with a small s-expression reader
//! (TinyScheme's string rules) and check its forms, so a path can never pass for a rule.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::*;

// === a test-only SBPL reader ===

/// One s-expression of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sexp {
    List(Vec<Sexp>),
    /// A string literal, unescaped.
    Str(String),
    /// A symbol or number.
    Atom(String),
}

impl Sexp {
    fn atom(&self) -> Option<&str> {
        match self {
            Sexp::Atom(atom) => Some(atom),
            _ => None,
        }
    }
}

/// The top-level forms of `text`, or what is wrong with it. Comments run from `;` to the end of
/// the line; in a string only `\"`, `\\`, `\n`, `\r`, `\t` are escapes (anything else is refused
/// here, so the renderer cannot lean on a reader's leniency).
fn parse(text: &str) -> Result<Vec<Sexp>, String> {
    let mut chars = text.chars().peekable();
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    while let Some(c) = chars.next() {
        match c {
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '(' => stack.push(Vec::new()),
            ')' => {
                let list = stack.pop().ok_or("unbalanced `)`")?;
                stack
                    .last_mut()
                    .ok_or("unbalanced `)`")?
                    .push(Sexp::List(list));
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next().ok_or("unterminated string")? {
                        '"' => break,
                        '\\' => match chars.next().ok_or("unterminated escape")? {
                            '"' => s.push('"'),
                            '\\' => s.push('\\'),
                            'n' => s.push('\n'),
                            'r' => s.push('\r'),
                            't' => s.push('\t'),
                            other => return Err(format!("unexpected escape \\{other}")),
                        },
                        c => s.push(c),
                    }
                }
                stack.last_mut().ok_or("unbalanced `)`")?.push(Sexp::Str(s));
            }
            c if c.is_whitespace() => {}
            c => {
                let mut atom = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || "()\";".contains(next) {
                        break;
                    }
                    atom.push(next);
                    chars.next();
                }
                stack
                    .last_mut()
                    .ok_or("unbalanced `)`")?
                    .push(Sexp::Atom(atom));
            }
        }
    }
    match (stack.pop(), stack.is_empty()) {
        (Some(top), true) => Ok(top),
        _ => Err("unbalanced `(`".into()),
    }
}

fn forms(profile: &str) -> Vec<Sexp> {
    parse(profile).unwrap_or_else(|err| panic!("the profile does not read: {err}\n{profile}"))
}

/// The operations each `(filter "path")` is allowed, over every `allow` form.
fn grants(profile: &str) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for form in forms(profile) {
        let Sexp::List(items) = form else { continue };
        if items.first().and_then(Sexp::atom) != Some("allow") {
            continue;
        }
        let operations: Vec<String> = items[1..]
            .iter()
            .map_while(Sexp::atom)
            .map(String::from)
            .collect();
        for filter in &items[1 + operations.len()..] {
            if let Sexp::List(filter) = filter
                && let [Sexp::Atom(kind), Sexp::Str(path)] = filter.as_slice()
            {
                out.entry((kind.clone(), path.clone()))
                    .or_default()
                    .extend(operations.iter().cloned());
            }
        }
    }
    out
}

/// The operations allowed for `path` as a `subpath`.
fn subpath_grant(profile: &str, path: &str) -> BTreeSet<String> {
    grants(profile)
        .remove(&("subpath".to_owned(), path.to_owned()))
        .unwrap_or_default()
}

fn ops(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|op| op.to_string()).collect()
}

fn policy(read: &[&str], write: &[&str], network: bool) -> Policy {
    Policy {
        read: read.iter().map(PathBuf::from).collect(),
        write: write.iter().map(PathBuf::from).collect(),
        network,
    }
}

fn rendered(policy: &Policy) -> String {
    render(policy).expect("the policy renders")
}

const READ_OPS: &[&str] = &["file-read*", "process-exec", "file-map-executable"];
const WRITE_OPS: &[&str] = &[
    "file-read*",
    "file-write*",
    "process-exec",
    "file-map-executable",
];

// === tests ===

#[test]
fn the_reader_reads_what_it_should() {
    let read = parse("(a \"x\\\"y\\\\z\\n\") ; (not this)\n(b)").expect("reads");
    assert_eq!(
        read,
        vec![
            Sexp::List(vec![Sexp::Atom("a".into()), Sexp::Str("x\"y\\z\n".into())]),
            Sexp::List(vec![Sexp::Atom("b".into())]),
        ]
    );
    assert!(parse("(a").is_err());
    assert!(parse("a)").is_err());
    assert!(parse("(\"a)").is_err());
    assert!(parse("(\"\\x41\")").is_err());
}

#[test]
fn every_path_gets_exactly_its_operations() {
    let profile = rendered(&policy(
        &["/Users/me/repo", "/usr", "/opt/tool/bin/cc"],
        &["/Users/me/repo/target", "/Users/me/scratch"],
        false,
    ));
    for path in ["/Users/me/repo", "/usr", "/opt/tool/bin/cc"] {
        assert_eq!(subpath_grant(&profile, path), ops(READ_OPS), "{path}");
    }
    for path in ["/Users/me/repo/target", "/Users/me/scratch"] {
        assert_eq!(subpath_grant(&profile, path), ops(WRITE_OPS), "{path}");
    }
    // Nothing else is reachable as a subtree, apart from /dev/fd.
    let subpaths: BTreeSet<String> = grants(&profile)
        .into_keys()
        .filter(|(kind, _)| kind == "subpath")
        .map(|(_, path)| path)
        .collect();
    let expected: BTreeSet<String> = [
        "/Users/me/repo",
        "/usr",
        "/opt/tool/bin/cc",
        "/Users/me/repo/target",
        "/Users/me/scratch",
        "/dev/fd",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(subpaths, expected);
}

#[test]
fn the_directories_above_get_metadata_only() {
    let profile = rendered(&policy(&["/Users/me/repo", "/usr/lib"], &[], false));
    let literals: BTreeMap<String, BTreeSet<String>> = grants(&profile)
        .into_iter()
        .filter(|((kind, path), _)| kind == "literal" && !path.starts_with("/dev/"))
        .map(|((_, path), ops)| (path, ops))
        .collect();
    let metadata = ops(&["file-read-metadata"]);
    let expected: BTreeMap<String, BTreeSet<String>> = ["/", "/Users", "/Users/me", "/usr"]
        .into_iter()
        .map(|dir| (dir.to_owned(), metadata.clone()))
        .collect();
    assert_eq!(literals, expected);

    // A directory read as a whole gets no metadata rule of its own.
    let profile = rendered(&policy(&["/usr", "/usr/lib"], &[], false));
    assert!(!grants(&profile).contains_key(&("literal".to_owned(), "/usr".to_owned())));
}

#[test]
fn quotes_backslashes_and_newlines_are_escaped() {
    assert_eq!(sbpl_string("/a b"), "\"/a b\"");
    assert_eq!(sbpl_string("/a\"b"), "\"/a\\\"b\"");
    assert_eq!(sbpl_string("/a\\b"), "\"/a\\\\b\"");
    assert_eq!(sbpl_string("/a\nb\rc\td"), "\"/a\\nb\\rc\\td\"");
    assert_eq!(sbpl_string("/ünï\u{1}"), "\"/ünï\u{1}\"");

    let odd = [
        "/repo/a\"b",
        "/repo/a\\b",
        "/repo/a\\\"b",
        "/repo/line\nbreak",
        "/repo/end\\",
        "/repo/tab\there",
    ];
    let profile = rendered(&policy(&odd, &[], false));
    for path in odd {
        assert_eq!(subpath_grant(&profile, path), ops(READ_OPS), "{path:?}");
    }
    // Every rule line stays one line: no raw newline inside a literal.
    assert!(!profile.contains("line\nbreak"));
}

#[test]
fn a_path_cannot_inject_a_rule() {
    let hostile = [
        "/tmp/a\")(allow default)(",
        "/repo/x\") (allow file-write* (subpath \"/\")) (\"",
        "/repo/x\\\")(allow network*)(",
        "/repo/x\n(allow default)\n;",
        "/repo/x; (allow default)",
    ];
    for path in hostile {
        let profile = rendered(&policy(&[path], &[path], true));
        let benign = rendered(&policy(&["/tmp/a"], &["/tmp/a"], true));
        let profile_forms = forms(&profile);
        // The same top-level forms as for a plain path, apart from the path strings.
        assert_eq!(profile_forms.len(), forms(&benign).len(), "{path:?}");
        for form in &profile_forms {
            let Sexp::List(items) = form else {
                panic!("a top-level atom in {profile}");
            };
            let head: Vec<&str> = items.iter().map_while(Sexp::atom).collect();
            assert_ne!(
                head,
                ["allow", "default"],
                "{path:?} injected (allow default)"
            );
        }
        // The path comes back whole as one string.
        let expected = private_aliases(path);
        for spelling in &expected {
            assert_eq!(
                subpath_grant(&profile, spelling),
                ops(WRITE_OPS),
                "{path:?}"
            );
        }
        // No subtree beyond the path's spellings and /dev/fd is opened.
        let opened: BTreeSet<String> = grants(&profile)
            .into_keys()
            .filter(|(kind, _)| kind == "subpath")
            .map(|(_, path)| path)
            .collect();
        let mut allowed: BTreeSet<String> = expected.into_iter().collect();
        allowed.insert("/dev/fd".into());
        assert_eq!(opened, allowed, "{path:?}");
    }
}

#[test]
fn the_network_is_allowed_only_when_the_policy_says_so() {
    let network_forms = |profile: &str| -> Vec<Sexp> {
        forms(profile)
            .into_iter()
            .filter(|form| {
                matches!(form, Sexp::List(items)
                    if items.iter().map_while(Sexp::atom).any(|op| op.starts_with("network")))
            })
            .collect()
    };
    let off = rendered(&policy(&["/repo"], &[], false));
    assert!(network_forms(&off).is_empty(), "{off}");
    // Only Unix sockets may be created (for socketpair), and nothing may be bound or connected.
    let sockets: Vec<Sexp> = forms(&off)
        .into_iter()
        .filter(|form| matches!(form, Sexp::List(items) if items.get(1) == Some(&Sexp::Atom("system-socket".into()))))
        .collect();
    assert_eq!(
        sockets,
        forms("(allow system-socket (socket-domain AF_UNIX))"),
        "{off}"
    );

    let on = rendered(&policy(&["/repo"], &[], true));
    assert_eq!(network_forms(&on), forms("(allow network*)"));
    assert!(forms(&on).contains(&forms("(allow system-socket)")[0]));
    // Everything else is the same profile.
    let without_network = |profile: &str| -> Vec<Sexp> {
        let network = [
            forms("(allow network*)")[0].clone(),
            forms("(allow system-socket)")[0].clone(),
        ];
        forms(profile)
            .into_iter()
            .filter(|form| !network.contains(form))
            .filter(|form| {
                !matches!(form, Sexp::List(items) if items.iter().any(|item| {
                    matches!(item, Sexp::List(f) if f.iter().any(|s| matches!(s, Sexp::Str(name)
                        if name.starts_with("com.apple.SystemConfiguration")
                            || name.starts_with("com.apple.trustd")
                            || name.starts_with("net.routetable"))))
                }))
            })
            .collect()
    };
    assert_eq!(without_network(&on), forms(&off));
}

#[test]
fn private_aliases_cover_both_spellings() {
    let cases: &[(&str, &[&str])] = &[
        ("/tmp/x", &["/tmp/x", "/private/tmp/x"]),
        ("/tmp", &["/tmp", "/private/tmp"]),
        (
            "/var/folders/ab/T",
            &["/var/folders/ab/T", "/private/var/folders/ab/T"],
        ),
        ("/etc/hosts", &["/etc/hosts", "/private/etc/hosts"]),
        ("/private/tmp/x", &["/private/tmp/x", "/tmp/x"]),
        ("/private/var", &["/private/var", "/var"]),
        ("/private/etc/ssl", &["/private/etc/ssl", "/etc/ssl"]),
        ("/private", &["/private"]),
        ("/private/other", &["/private/other"]),
        ("/privatetmp/x", &["/privatetmp/x"]),
        ("/tmpfoo", &["/tmpfoo"]),
        ("/etcetera/x", &["/etcetera/x"]),
        ("/usr/tmp", &["/usr/tmp"]),
        ("/", &["/"]),
    ];
    for (path, expected) in cases {
        assert_eq!(private_aliases(path), *expected, "{path}");
    }

    let profile = rendered(&policy(&["/etc"], &["/tmp/scratch"], false));
    assert_eq!(subpath_grant(&profile, "/etc"), ops(READ_OPS));
    assert_eq!(subpath_grant(&profile, "/private/etc"), ops(READ_OPS));
    assert_eq!(subpath_grant(&profile, "/tmp/scratch"), ops(WRITE_OPS));
    assert_eq!(
        subpath_grant(&profile, "/private/tmp/scratch"),
        ops(WRITE_OPS)
    );
    // The links themselves and /private can be resolved (stat, readlink).
    for dir in ["/", "/tmp", "/private", "/private/tmp"] {
        assert_eq!(
            grants(&profile).get(&("literal".to_owned(), dir.to_owned())),
            Some(&ops(&["file-read-metadata"])),
            "{dir}"
        );
    }
}

#[test]
fn the_same_policy_renders_the_same_text() {
    let p = policy(&["/b", "/a", "/tmp/x"], &["/c"], true);
    assert_eq!(rendered(&p), rendered(&p.clone()));
    // A path given twice, or in both spellings, is one rule; paths keep the policy's order.
    let twice = rendered(&policy(
        &["/b", "/a/", "/b", "/a", "/private/tmp/x", "/tmp/x"],
        &[],
        false,
    ));
    let once = rendered(&policy(&["/b", "/a", "/private/tmp/x"], &[], false));
    assert_eq!(twice, once);
    assert!(once.find("\"/b\"") < once.find("\"/a\""));
}

#[test]
fn an_unusable_path_is_refused() {
    let refused = |path: PathBuf| {
        render(&Policy {
            read: vec![PathBuf::from("/usr"), path],
            ..Policy::default()
        })
    };
    assert_eq!(
        refused(PathBuf::from("/repo/a\0b")),
        Err(RenderError::ContainsNul {
            path: "/repo/a\0b".into()
        })
    );
    assert_eq!(
        refused(PathBuf::from(OsStr::from_bytes(b"/repo/\xff"))),
        Err(RenderError::NotUtf8 {
            path: "/repo/\u{fffd}".into()
        })
    );
    assert_eq!(
        refused(PathBuf::from("repo")),
        Err(RenderError::NotAbsolute {
            path: "repo".into()
        })
    );
    assert_eq!(
        refused(PathBuf::from("/repo/../etc")),
        Err(RenderError::NotCanonical {
            path: "/repo/../etc".into()
        })
    );
    // In the write list too.
    assert!(render(&policy(&[], &["relative"], false)).is_err());

    let err = GatewayError::from(RenderError::NotAbsolute {
        path: "repo".into(),
    });
    assert_eq!(err.code, "sandbox.policy_invalid");
    assert!(err.message.contains("repo"), "{}", err.message);
}

#[test]
fn paths_are_normalized_before_they_are_written() {
    let profile = rendered(&policy(&["/usr//lib/./x/", "/"], &[], false));
    assert_eq!(subpath_grant(&profile, "/usr/lib/x"), ops(READ_OPS));
    assert_eq!(subpath_grant(&profile, "/"), ops(READ_OPS));
    assert!(!profile.contains("/./") && !profile.contains("//"));
}

#[test]
fn no_operation_is_allowed_everywhere_by_accident() {
    // Forms without a filter: allowed everywhere on purpose, and only these.
    let unfiltered = |profile: &str| -> BTreeSet<String> {
        forms(profile)
            .into_iter()
            .filter_map(|form| match form {
                Sexp::List(items) if items.iter().all(|item| matches!(item, Sexp::Atom(_))) => {
                    Some(
                        items
                            .iter()
                            .filter_map(Sexp::atom)
                            .collect::<Vec<_>>()
                            .join(" "),
                    )
                }
                _ => None,
            })
            .collect()
    };
    let expected: BTreeSet<String> = [
        "version 1",
        "deny default",
        "allow process-fork",
        "allow ipc-posix-sem",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    // An empty policy renders no empty `allow` for its (missing) paths.
    assert_eq!(unfiltered(&rendered(&Policy::default())), expected);
    let mut with_network = expected.clone();
    with_network.extend([
        "allow network*".to_owned(),
        "allow system-socket".to_owned(),
    ]);
    assert_eq!(unfiltered(&rendered(&policy(&[], &[], true))), with_network);

    // process-exec and file-write* appear only with the policy's paths.
    let profile = rendered(&policy(&["/r"], &["/w"], false));
    for ((kind, path), granted) in grants(&profile) {
        if granted.contains("process-exec") || granted.contains("file-write*") {
            assert_eq!(kind, "subpath", "{path}");
            assert!(["/r", "/w"].contains(&path.as_str()), "{path}");
        }
    }
    assert_eq!(
        grants(&profile).get(&("literal".to_owned(), "/dev/null".to_owned())),
        Some(&ops(&["file-read*", "file-write-data"]))
    );
}

#[test]
fn system_read_roots_are_toolchain_only() {
    let roots = macos_system_read_roots();
    for root in roots {
        assert!(root.starts_with('/') && !root.ends_with('/'), "{root}");
        assert_eq!(checked(Path::new(root)).as_deref(), Ok(*root), "{root}");
        for secret in [
            "/Users",
            "/Volumes",
            "/private/var/folders",
            "/var/folders",
            "/var/run",
        ] {
            assert!(
                !Path::new(secret).starts_with(root),
                "{root} holds {secret}"
            );
            assert!(
                !Path::new(root).starts_with(secret),
                "{root} is under {secret}"
            );
        }
        assert!(
            !root.contains("/Library/Keychains") && !root.contains("/.ssh"),
            "{root}"
        );
    }
    // Not the whole of /System (the data volume with every home) nor of /Library.
    assert!(!roots.contains(&"/System") && !roots.contains(&"/Library") && !roots.contains(&"/"));
    let unique: BTreeSet<_> = roots.iter().collect();
    assert_eq!(unique.len(), roots.len());

    let p = Policy {
        read: roots.iter().map(PathBuf::from).collect(),
        ..Policy::default()
    };
    let profile = rendered(&p);
    assert_eq!(subpath_grant(&profile, "/private/etc"), ops(READ_OPS));
    assert_eq!(
        subpath_grant(&profile, "/private/var/db/timezone"),
        ops(READ_OPS)
    );
}

#[test]
fn command_argv_puts_the_profile_before_the_command() {
    let argv = command_argv("(version 1)", "-cargo", &["test".into(), "--".into()]);
    assert_eq!(
        argv,
        [
            "/usr/bin/sandbox-exec",
            "-p",
            "(version 1)",
            "--",
            "-cargo",
            "test",
            "--"
        ]
    );
    assert_eq!(command_argv("p", "/bin/true", &[]).len(), 5);
}

#[test]
fn golden_profile_of_a_small_policy() {
    let profile = rendered(&policy(&["/usr", "/Users/me/repo"], &["/tmp/run-1"], false));
    let expected = format!(
        "{BASE}{}",
        r#"
; Directories above the paths below: stat and readlink only, for realpath and the like.
(allow file-read-metadata
  (literal "/")
  (literal "/Users")
  (literal "/Users/me")
  (literal "/tmp")
  (literal "/private")
  (literal "/private/tmp"))

; Policy read paths: read, run, and map as code.
(allow file-read* process-exec file-map-executable
  (subpath "/usr")
  (subpath "/Users/me/repo"))

; Policy write paths: create, change, remove, and read, run, map as code.
(allow file-read* file-write* process-exec file-map-executable
  (subpath "/tmp/run-1")
  (subpath "/private/tmp/run-1"))

; No network (policy.network is false): denied by default.
"#
    );
    assert_eq!(profile, expected, "\n--- got ---\n{profile}");
    // The fixed part, once, in full.
    assert!(BASE.starts_with("(version 1)\n(deny default)\n"));
    assert_eq!(
        forms(BASE)
            .iter()
            .filter_map(|form| match form {
                Sexp::List(items) => Some(
                    items
                        .iter()
                        .map_while(Sexp::atom)
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                _ => None,
            })
            .collect::<Vec<_>>(),
        [
            "version 1",
            "deny default",
            "allow process-fork",
            "allow signal",
            "allow process-info*",
            "allow sysctl-read",
            "allow mach-lookup",
            "allow ipc-posix-sem",
            "allow system-socket",
            "allow file-read* file-write-data",
            "allow file-read*",
            "allow file-read-data file-write-data",
        ]
    );
}
