//! Redaction: the one function that removes secrets and local paths from text before it leaves
//! the machine or reaches a log — tool events, logs and `run_check` output (DESIGN §7, draft §10
//! "Command tool output must be filtered for tokens, environment variables, and absolute paths").
//!
//! A [`Redactor`] applies two passes:
//!
//! 1. **Token patterns** (one compiled alternation, shared by every redactor; formats after
//!    gitleaks' rule list). Each match becomes `[REDACTED:<kind>]`:
//!
//!    | kind | what |
//!    |---|---|
//!    | `private-key` | a PEM/PGP `-----BEGIN … PRIVATE KEY…-----` block through its `END` line; an unterminated block to the end of the text |
//!    | `github-token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` + 36 or more, `github_pat_` + 22 or more |
//!    | `gitlab-token` | `glpat-`, `gloas-`, `glrt-`, `glptt-`, `gldt-`, `glft-`, `glsoat-`, `glcbt-`, `glimt-`, `glagent-`, `glffct-`, `glwt-` + 20 or more; runner registration `GR1348941…` |
//!    | `aws-access-key-id` | `AKIA`, `ASIA`, `ABIA`, `ACCA`, `A3T?` + 16 base-32 characters |
//!    | `slack-token` | `xox[abposre]-…`, `xapp-…` |
//!    | `anthropic-key` | `sk-ant-…` |
//!    | `openai-key` | `sk-…`, `sk-proj-…` (20 or more characters, with a digit) |
//!    | `google-api-key` | `AIza` + 35 |
//!    | `stripe-key` | `sk_live_`, `rk_live_`, `sk_test_`, `rk_test_` |
//!    | `jwt` | `eyJ….eyJ….…` |
//!
//!    Some patterns keep their context and replace only the secret with `[REDACTED]`:
//!    `Authorization: [REDACTED]` and `Proxy-Authorization:` (a scheme such as `Bearer` + the
//!    rest of the line, or one credential of 8 or more characters), `Bearer [REDACTED]`
//!    (a credential of 8 or more characters with a digit, or 24 or more), URL passwords
//!    (`https://user:[REDACTED]@host`), and secret assignments `API_KEY=[REDACTED]`,
//!    `password: [REDACTED]`, `"token": "[REDACTED]"`, where the key contains `TOKEN`, `SECRET`,
//!    `PASSWORD`, `PASSWD`, `PWD`, `API_KEY`/`APIKEY`, `ACCESS_KEY`, `PRIVATE_KEY` or
//!    `CREDENTIAL` (any case; the names `PWD` and `OLDPWD` themselves are directories, not
//!    secrets). A quoted value is always redacted; an unquoted one only when the key is
//!    directly followed by `=` or `:` and the value reads as data, not code — so
//!    `let token = parse_token(x);`, `token: String,` and `fn f(password: &str)` survive.
//! 2. **Literals**: exact secret strings ([`Redactor::with_secret`], and the values of this
//!    process's secret-looking environment variables, see [`Redactor::new`]) become
//!    `[REDACTED:secret]` / `[REDACTED:env]`; paths ([`Redactor::with_path`], and the user's home
//!    as `~`) are replaced where they start and end at a path-component boundary, so
//!    `/home/u/repo-evil` is not `<repo>-evil` but `~/repo-evil`. At one position the longest
//!    literal wins, so a repository inside the home directory is `<repo>`.
//!
//! The distinctive prefixes (`ghp_`, `glpat-`, `xoxb-`, `sk-ant-`) match anywhere, also glued to
//! other text; the others (`sk-`, `AKIA`, `AIza`, `eyJ`, `sk_live_`) only at the start of a
//! word, so ordinary identifiers such as `risk-management` survive.
//!
//! Redacting is idempotent (redacting redacted text changes nothing) and never panics.

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use aho_corasick::{AhoCorasick, MatchKind};
use regex::{CaptureLocations, Regex};

/// Exact secrets shorter than this are ignored: redacting every `1` or `on` would destroy the
/// text and protect nothing.
pub const MIN_SECRET_LEN: usize = 8;

/// Removes secrets and local paths from text (see the module docs for what and how).
///
/// Immutable and cheap to clone (an `Arc` inside); build it once per context with
/// [`Redactor::new`] and the `with_*` methods.
#[derive(Clone)]
pub struct Redactor {
    inner: Arc<Literals>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secrets themselves.
        f.debug_struct("Redactor")
            .field("literals", &self.inner.items.len())
            .finish()
    }
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new()
    }
}

/// Redact `text` with the default [`Redactor::new`] (built on first use, then shared).
/// Borrows `text` back when nothing was found.
pub fn redact(text: &str) -> Cow<'_, str> {
    static DEFAULT: LazyLock<Redactor> = LazyLock::new(Redactor::new);
    DEFAULT.redact(text)
}

impl Redactor {
    /// The built-in token patterns, the user's home directory (→ `~`, its given and canonical
    /// spelling), and the values of this process's environment variables that look secret
    /// (→ `[REDACTED:env]`):
    ///
    /// - a variable whose **name** contains `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PWD`
    ///   (not `PWD`/`OLDPWD` themselves), `KEY`, `CREDENTIAL`, `AUTH`, `COOKIE` or `SESSION`,
    ///   with a value of at least [`MIN_SECRET_LEN`] characters;
    /// - any variable whose **value** is long and unusual: at least 20 characters, no
    ///   whitespace, none of `:;,` (lists such as `PATH` or `LS_COLORS`), not starting with `/`,
    ///   `.` or `~` (paths), letters and digits both present, not only hex digits and `-`
    ///   (commit ids and UUIDs, which output is full of), and at least 12 distinct characters.
    ///
    /// Trivial values (`1`, `C.UTF-8`, `/bin`, `xterm-256color`) are never redacted.
    pub fn new() -> Redactor {
        let mut items = Vec::new();
        if let Some(dirs) = directories::BaseDirs::new() {
            push_path(&mut items, dirs.home_dir(), "~");
        }
        for (name, value) in std::env::vars_os() {
            let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
                continue;
            };
            if env_value_is_secret(name, value) {
                push_literal(&mut items, value, "[REDACTED:env]", false);
            }
        }
        Redactor {
            inner: Arc::new(Literals::build(items)),
        }
    }

    /// The same redactor that also replaces `path` with `replacement` (e.g. the repository
    /// root with `<repo>`), in its given spelling and its canonical one (symbolic links
    /// resolved), at path-component boundaries only. A trailing `/` is ignored; `/` itself,
    /// an empty path and a non-UTF-8 path are ignored.
    pub fn with_path(self, path: &Path, replacement: &str) -> Redactor {
        let mut items = self.inner.items.clone();
        push_path(&mut items, path, replacement);
        Redactor {
            inner: Arc::new(Literals::build(items)),
        }
    }

    /// The same redactor that also replaces every occurrence of `value` (e.g. the gateway's
    /// token) with `[REDACTED:secret]`. Values shorter than [`MIN_SECRET_LEN`] are ignored.
    pub fn with_secret(self, value: impl Into<String>) -> Redactor {
        let value = value.into();
        let mut items = self.inner.items.clone();
        push_literal(&mut items, &value, "[REDACTED:secret]", false);
        Redactor {
            inner: Arc::new(Literals::build(items)),
        }
    }

    /// `text` without secrets and local paths; borrowed back when nothing was found.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let once = |text: &str| -> Option<String> {
            match apply_patterns(text) {
                Cow::Borrowed(text) => match self.inner.apply(text) {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(out) => Some(out),
                },
                Cow::Owned(out) => Some(self.inner.apply(&out).into_owned()),
            }
        };
        let Some(mut current) = once(text) else {
            return Cow::Borrowed(text);
        };
        // A replacement can complete a pattern (`https://u:/home/me@h` becomes
        // `https://u:~@h`): repeat until nothing changes, so redacting is idempotent.
        for _ in 0..4 {
            match once(&current) {
                Some(next) => current = next,
                None => break,
            }
        }
        Cow::Owned(current)
    }
}

// === Environment ===

fn env_value_is_secret(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper == "PWD" || upper == "OLDPWD" {
        return false;
    }
    const SECRET_NAME_PARTS: [&str; 10] = [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PWD",
        "KEY",
        "CREDENTIAL",
        "AUTH",
        "COOKIE",
        "SESSION",
    ];
    // `SSH_AUTH_SOCK`, `GPG_AGENT_INFO`: paths to sockets, not secrets.
    let looks_like_path = value.starts_with('/') || value.starts_with('~');
    if SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
        && value.chars().count() >= MIN_SECRET_LEN
        && !looks_like_path
    {
        return true;
    }
    looks_random(value)
}

/// Long, token-like and varied (see [`Redactor::new`]).
fn looks_random(value: &str) -> bool {
    if value.len() < 20
        || value.starts_with(['/', '.', '~'])
        || value
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, ':' | ';' | ','))
    {
        return false;
    }
    let has_letter = value.chars().any(|c| c.is_ascii_alphabetic());
    let has_digit = value.chars().any(|c| c.is_ascii_digit());
    let hex_like = value.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    let mut distinct: Vec<char> = value.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    has_letter && has_digit && !hex_like && distinct.len() >= 12
}

// === Literals (secrets and paths) ===

/// One exact string to replace.
#[derive(Debug, Clone)]
struct Literal {
    needle: String,
    replacement: String,
    /// Replace only at path-component boundaries.
    path: bool,
}

fn push_literal(items: &mut Vec<Literal>, needle: &str, replacement: &str, path: bool) {
    if !path && needle.chars().count() < MIN_SECRET_LEN {
        return;
    }
    if needle.is_empty() || items.iter().any(|l| l.needle == needle) {
        return;
    }
    items.push(Literal {
        needle: needle.to_owned(),
        replacement: replacement.to_owned(),
        path,
    });
}

fn push_path(items: &mut Vec<Literal>, path: &Path, replacement: &str) {
    let mut spellings = vec![path.to_owned()];
    if let Ok(canonical) = std::fs::canonicalize(path) {
        spellings.push(canonical);
    }
    for spelling in spellings {
        let Some(text) = spelling.to_str() else {
            continue;
        };
        let text = text.trim_end_matches('/');
        if text.is_empty() {
            continue;
        }
        push_literal(items, text, replacement, true);
    }
}

/// The literal pass: one Aho-Corasick automaton over every needle.
struct Literals {
    items: Vec<Literal>,
    // Invariant: built from `items` (pattern id = index), `None` when `items` is empty.
    automaton: Option<AhoCorasick>,
}

impl Literals {
    fn build(items: Vec<Literal>) -> Literals {
        let automaton = if items.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(items.iter().map(|l| l.needle.as_str()))
                .ok()
        };
        Literals { items, automaton }
    }

    fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(automaton) = &self.automaton else {
            return Cow::Borrowed(text);
        };
        // Every occurrence (overlapping), then leftmost first, longest at one position.
        let mut found: Vec<(usize, usize, usize)> = automaton
            .find_overlapping_iter(text)
            .filter(|m| {
                let item = &self.items[m.pattern().as_usize()];
                !item.path || at_component_boundary(text, m.start(), m.end())
            })
            .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
            .collect();
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (start, end, id) in found {
            if start < last {
                continue;
            }
            out.push_str(&text[last..start]);
            out.push_str(&self.items[id].replacement);
            last = end;
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }
}

/// Whether `text[start..end]` is a whole path: not preceded by a name character, and followed
/// by the end, `/`, or a character that cannot continue a file name.
fn at_component_boundary(text: &str, start: usize, end: usize) -> bool {
    let name_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '@' | '~');
    let before_ok = text[..start]
        .chars()
        .next_back()
        .is_none_or(|c| !name_char(c));
    let after_ok = text[end..]
        .chars()
        .next()
        .is_none_or(|c| c == '/' || !name_char(c));
    before_ok && after_ok
}

// === Token patterns ===

/// How a pattern's match is replaced.
#[derive(Debug, Clone, Copy)]
enum Replace {
    /// The whole match becomes `[REDACTED:<kind>]`.
    Whole,
    /// Only the named inner group becomes `[REDACTED]`; `check` filters false positives.
    Group(&'static str, Check),
}

/// A post-match check of the secret part, for what a regex without look-around cannot say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    None,
    /// Has a digit or is at least 24 long (a bearer credential, not a word).
    Credential,
    /// Reads as a value, not code (unquoted assignments).
    UnquotedValue,
    /// The key is not `PWD`/`OLDPWD` (quoted assignments).
    Quoted,
    /// Not a path such as `Authorization::{…}` (header values).
    Header,
}

struct Rule {
    kind: &'static str,
    pattern: &'static str,
    replace: Replace,
    /// For `Whole` rules: the match must contain a digit.
    needs_digit: bool,
}

const KEY: &str = r"(?-u:\b)(?P<KEYNAME>[A-Za-z0-9_.\-]*(?i-u:token|secret|passw(?:or)?d|pwd|api_?key|access_?key|private_?key|credential)[A-Za-z0-9_.\-]*)";

/// The rules, in priority order (at one position the earlier rule wins).
fn rules() -> Vec<Rule> {
    let whole = |kind, pattern| Rule {
        kind,
        pattern,
        replace: Replace::Whole,
        needs_digit: false,
    };
    vec![
        whole(
            "private-key",
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\z)",
        ),
        Rule {
            kind: "authorization",
            pattern: r#"(?i-u:(?-u:\b)(?:proxy-)?authorization)["']?[ \t]*[:=][ \t]*["']?(?P<AUTH>(?i-u:bearer|basic|token|digest|negotiate|ntlm|bot|apikey|aws4-hmac-sha256)[ \t]+[^\r\n"']+|[^\s"']{8,})"#,
            replace: Replace::Group("AUTH", Check::Header),
            needs_digit: false,
        },
        Rule {
            kind: "url-password",
            pattern: r#"(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@\[\]"'<>]*:(?P<URLPASS>[^\s/?#@"'<>]+)@"#,
            replace: Replace::Group("URLPASS", Check::None),
            needs_digit: false,
        },
        Rule {
            kind: "secret-assignment",
            // `KEY="value"`, `"key": "value"`, `key = 'value'`.
            pattern: r#"KEYPAT["']?[ \t]*[:=][ \t]*(?:"(?P<QDQ>[^"\r\n]+)"|'(?P<QSQ>[^'\r\n]+)')"#,
            replace: Replace::Group("QDQ|QSQ", Check::Quoted),
            needs_digit: false,
        },
        Rule {
            kind: "secret-assignment",
            // `KEY=value`, `key: value` (no space before the separator).
            pattern: r#"KEYPAT[:=][ \t]*(?P<UNQ>[^\s"'`]+)"#,
            replace: Replace::Group("UNQ", Check::UnquotedValue),
            needs_digit: false,
        },
        Rule {
            kind: "bearer",
            pattern: r"(?-u:\b)(?i-u:bearer)[ \t]+(?P<BEARER>[A-Za-z0-9._~+/\-]{8,}=*)",
            replace: Replace::Group("BEARER", Check::Credential),
            needs_digit: false,
        },
        whole(
            "github-token",
            r"(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        ),
        whole(
            "gitlab-token",
            r"(?:(?:glpat|gloas|glrt|glptt|gldt|glft|glsoat|glcbt|glimt|glagent|glffct|glwt)-[0-9A-Za-z_\-]{20,}(?:\.[0-9A-Za-z_\-]+)*|GR1348941[0-9A-Za-z_\-]{20,})",
        ),
        whole(
            "aws-access-key-id",
            r"(?-u:\b)(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?-u:\b)",
        ),
        whole(
            "slack-token",
            r"(?:xox[abposre]-[0-9A-Za-z\-]{10,}|xapp-[0-9]-[0-9A-Za-z\-]{10,})",
        ),
        whole("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
        whole(
            "stripe-key",
            r"(?-u:\b)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}(?-u:\b)",
        ),
        Rule {
            kind: "openai-key",
            pattern: r"(?-u:\b)sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
            replace: Replace::Whole,
            needs_digit: true,
        },
        whole("google-api-key", r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}(?-u:\b)"),
        whole(
            "jwt",
            r"(?-u:\b)eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*",
        ),
    ]
}

/// One pass: the alternation of some rules, rule `i` being the group `R{i}`.
struct Pass {
    regex: Regex,
    rules: Vec<CompiledRule>,
    /// Each rule alone, anchored at the start: tried at a position where an earlier rule
    /// matched but was refused, so a refused match never hides a later rule's.
    alone: Vec<Pass>,
}

struct CompiledRule {
    kind: &'static str,
    group: usize,
    /// Inner groups whose span is the secret (`Replace::Group`).
    secret: Vec<usize>,
    /// The key group of an assignment.
    key: Option<usize>,
    check: Check,
    whole: bool,
    needs_digit: bool,
}

/// Whole tokens first, then the rules that keep context, so `GITHUB_TOKEN=ghp_…` and a token
/// inside a refused assignment are found by the token pass either way.
static TOKENS: LazyLock<Pass> = LazyLock::new(|| {
    let rules: Vec<Rule> = rules()
        .into_iter()
        .filter(|r| matches!(r.replace, Replace::Whole))
        .collect();
    Pass::build(&rules, false)
});
static CONTEXT: LazyLock<Pass> = LazyLock::new(|| {
    let rules: Vec<Rule> = rules()
        .into_iter()
        .filter(|r| matches!(r.replace, Replace::Group(..)))
        .collect();
    Pass::build(&rules, false)
});

/// Both passes.
fn apply_patterns(text: &str) -> Cow<'_, str> {
    match TOKENS.apply(text) {
        Cow::Borrowed(text) => CONTEXT.apply(text),
        Cow::Owned(out) => Cow::Owned(CONTEXT.apply(&out).into_owned()),
    }
}

impl Pass {
    fn build(rules: &[Rule], anchored: bool) -> Pass {
        let mut alternation = String::new();
        for (i, rule) in rules.iter().enumerate() {
            if i > 0 {
                alternation.push('|');
            }
            let key = KEY.replace("KEYNAME", &format!("K{i}"));
            let mut body = rule.pattern.replace("KEYPAT", &key);
            // Inner group names are made unique per rule.
            for name in ["AUTH", "URLPASS", "QDQ", "QSQ", "UNQ", "BEARER"] {
                body = body.replace(&format!("(?P<{name}>"), &format!("(?P<{name}{i}>"));
            }
            alternation.push_str(&format!("(?P<R{i}>{body})"));
        }
        if anchored {
            alternation = format!("^(?:{alternation})");
        }
        let regex = regex::RegexBuilder::new(&alternation)
            .size_limit(64 << 20)
            .dfa_size_limit(64 << 20)
            .build()
            .expect("the built-in redaction patterns compile");
        let index = |name: &str| {
            regex
                .capture_names()
                .position(|n| n == Some(name))
                .expect("every rule group exists")
        };
        let compiled = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let (secret, check, whole) = match rule.replace {
                    Replace::Whole => (Vec::new(), Check::None, true),
                    Replace::Group(names, check) => (
                        names
                            .split('|')
                            .map(|n| index(&format!("{n}{i}")))
                            .collect(),
                        check,
                        false,
                    ),
                };
                let key = rule
                    .pattern
                    .contains("KEYPAT")
                    .then(|| index(&format!("K{i}")));
                CompiledRule {
                    kind: rule.kind,
                    group: index(&format!("R{i}")),
                    secret,
                    key,
                    check,
                    whole,
                    needs_digit: rule.needs_digit,
                }
            })
            .collect();
        let alone = if anchored || rules.len() < 2 {
            Vec::new()
        } else {
            rules
                .iter()
                .map(|rule| {
                    Pass::build(
                        std::slice::from_ref(&Rule {
                            kind: rule.kind,
                            pattern: rule.pattern,
                            replace: rule.replace,
                            needs_digit: rule.needs_digit,
                        }),
                        true,
                    )
                })
                .collect()
        };
        Pass {
            regex,
            rules: compiled,
            alone,
        }
    }

    fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut locs: CaptureLocations = self.regex.capture_locations();
        let mut out: Option<String> = None;
        let mut copied = 0; // text[..copied] is in `out`
        let mut at = 0;
        while at <= text.len() {
            let Some(m) = self.regex.captures_read_at(&mut locs, text, at) else {
                break;
            };
            let start = m.start();
            let Some(first) = self.rules.iter().position(|r| locs.get(r.group).is_some()) else {
                break;
            };
            let replacement = self
                .replacement(&self.rules[first], text, &locs)
                .or_else(|| self.later_rule_at(first, text, start));
            match replacement {
                Some((span_end, with)) => {
                    let out = out.get_or_insert_with(|| String::with_capacity(text.len() + 64));
                    out.push_str(&text[copied..start]);
                    out.push_str(&with);
                    copied = span_end;
                    at = span_end.max(start + 1);
                }
                // Not a secret after all: look again from the next character, so a token
                // inside the refused span is still found.
                None => at = start + 1,
            }
            while at < text.len() && !text.is_char_boundary(at) {
                at += 1;
            }
        }
        match out {
            None => Cow::Borrowed(text),
            Some(mut out) => {
                out.push_str(&text[copied..]);
                Cow::Owned(out)
            }
        }
    }

    /// A rule after `refused` that matches at `start` and is not refused itself.
    fn later_rule_at(&self, refused: usize, text: &str, start: usize) -> Option<(usize, String)> {
        let rest = &text[start..];
        self.alone.iter().skip(refused + 1).find_map(|single| {
            let mut locs = single.regex.capture_locations();
            single.regex.captures_read(&mut locs, rest)?;
            let (end, with) = single.replacement(&single.rules[0], rest, &locs)?;
            Some((start + end, with))
        })
    }

    /// Where the replaced span ends (it starts at the match) and its replacement, or `None`
    /// when the match is a false positive.
    fn replacement(
        &self,
        rule: &CompiledRule,
        text: &str,
        locs: &CaptureLocations,
    ) -> Option<(usize, String)> {
        let (start, end) = locs.get(rule.group)?;
        if rule.whole {
            let matched = &text[start..end];
            if rule.needs_digit && !matched.bytes().any(|b| b.is_ascii_digit()) {
                return None;
            }
            return Some((end, format!("[REDACTED:{}]", rule.kind)));
        }
        let (s, e) = rule.secret.iter().find_map(|&g| locs.get(g))?;
        let secret = &text[s..e];
        if secret.starts_with("[REDACTED") {
            return None;
        }
        if let Some(key) = rule.key.and_then(|g| locs.get(g)) {
            let key = &text[key.0..key.1];
            if key.eq_ignore_ascii_case("pwd") || key.eq_ignore_ascii_case("oldpwd") {
                return None;
            }
        }
        let ok = match rule.check {
            Check::None | Check::Quoted => true,
            Check::Header => !secret.starts_with(':'),
            Check::Credential => secret.bytes().any(|b| b.is_ascii_digit()) || secret.len() >= 24,
            Check::UnquotedValue => {
                let colon = rule
                    .key
                    .and_then(|g| locs.get(g))
                    .is_some_and(|(_, key_end)| text[key_end..].starts_with(':'));
                unquoted_value_is_data(secret, colon)
            }
        };
        if !ok {
            return None;
        }
        // The kept context (a key, a header name, a URL's user) may hold an assignment itself.
        let mut with = CONTEXT.apply(&text[start..s]).into_owned();
        with.push_str("[REDACTED]");
        with.push_str(&CONTEXT.apply(&text[e..end]));
        Some((end, with))
    }
}

/// An unquoted assignment value that reads as data: no brackets, parentheses, `;`, `|`, `$`
/// or `&` (code, types, references, shell variables), no `::` or leading `:` (paths such as
/// `Token::new`), no trailing `,`, not empty. After a `:` (`key: value`, also Rust and
/// TypeScript type annotations) a primitive type name or a capitalized word without digits
/// (`String`, `CancellationToken`) is a type, not a secret.
fn unquoted_value_is_data(value: &str, after_colon: bool) -> bool {
    const PRIMITIVES: [&str; 18] = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char", "str", "string",
    ];
    let type_like = after_colon
        && (PRIMITIVES.contains(&value)
            || (value.starts_with(|c: char| c.is_ascii_uppercase())
                && value.chars().all(|c| c.is_ascii_alphabetic())));
    !value.is_empty()
        && !type_like
        && !value.ends_with(',')
        && !value.starts_with(['&', '*', '#', ':'])
        && !value.contains("::")
        && !value.contains(['(', ')', '{', '}', '[', ']', '<', '>', ';', '|', '$'])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A redactor with no environment or home: only the patterns and what a test adds.
    fn bare() -> Redactor {
        Redactor {
            inner: Arc::new(Literals::build(Vec::new())),
        }
    }

    fn check(redactor: &Redactor, input: &str, expect: &str) {
        let once = redactor.redact(input);
        assert_eq!(once, expect, "input: {input:?}");
        let twice = redactor.redact(&once);
        assert_eq!(twice, once, "not idempotent for {input:?}");
        if input == expect {
            assert!(
                matches!(once, Cow::Borrowed(_)),
                "unchanged text is borrowed"
            );
        }
    }

    const GHP: &str = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123";

    #[test]
    fn token_formats() {
        let r = bare();
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        let table: &[(&str, &str)] = &[
            (GHP, "[REDACTED:github-token]"),
            (
                "push to https://github.com with gho_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123.",
                "push to https://github.com with [REDACTED:github-token].",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[REDACTED:github-token]",
            ),
            ("glpat-abcdefghij0123456789", "[REDACTED:gitlab-token]"),
            (
                "token glrt-abcdefghij0123456789xyz.",
                "token [REDACTED:gitlab-token].",
            ),
            ("GR1348941abcdefghij0123456789", "[REDACTED:gitlab-token]"),
            (
                "key AKIAIOSFODNN7EXAMPLE end",
                "key [REDACTED:aws-access-key-id] end",
            ),
            ("ASIAY34FZKBOKMUTVV7A", "[REDACTED:aws-access-key-id]"),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                "[REDACTED:slack-token]",
            ),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
                "[REDACTED:anthropic-key]",
            ),
            (
                "sk-proj-abcDEF0123456789ghijKLMNOP",
                "[REDACTED:openai-key]",
            ),
            ("sk-abcDEF0123456789ghijKLMNOP", "[REDACTED:openai-key]"),
            (
                "AIzaSyA1234567890abcdefghijklmnopqrstuv",
                "[REDACTED:google-api-key]",
            ),
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED:stripe-key]"),
            ("rk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED:stripe-key]"),
            (jwt, "[REDACTED:jwt]"),
            (
                "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\nb",
                "a\n[REDACTED:private-key]\nb",
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\ntruncated here",
                "[REDACTED:private-key]",
            ),
            (
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\nx\n-----END PGP PRIVATE KEY BLOCK-----",
                "[REDACTED:private-key]",
            ),
            (
                "Authorization: Bearer abc.def.ghi",
                "Authorization: [REDACTED]",
            ),
            (
                "proxy-authorization: Basic dXNlcjpwYXNz\nnext",
                "proxy-authorization: [REDACTED]\nnext",
            ),
            (
                r#"{"Authorization": "token 0123456789abcdef"}"#,
                r#"{"Authorization": "[REDACTED]"}"#,
            ),
            (
                "curl -H 'Authorization: Bearer x1y2z3w4v5' url",
                "curl -H 'Authorization: [REDACTED]' url",
            ),
            ("using bearer 0123456789abcdef", "using bearer [REDACTED]"),
            ("API_KEY=abc123def", "API_KEY=[REDACTED]"),
            (
                "export GITHUB_TOKEN=whatever",
                "export GITHUB_TOKEN=[REDACTED]",
            ),
            (
                &format!("GITHUB_TOKEN={GHP}"),
                "GITHUB_TOKEN=[REDACTED:github-token]",
            ),
            ("db_password: hunter22", "db_password: [REDACTED]"),
            (
                r#"{"client_secret": "s3cr3t value", "n": 1}"#,
                r#"{"client_secret": "[REDACTED]", "n": 1}"#,
            ),
            (
                r#"let token = "literal-secret";"#,
                r#"let token = "[REDACTED]";"#,
            ),
            (
                "aws_secret_access_key = 'wJalrXUtnFEMI'",
                "aws_secret_access_key = '[REDACTED]'",
            ),
            ("DB_PWD=pa55", "DB_PWD=[REDACTED]"),
            ("--token=abc123", "--token=[REDACTED]"),
            (
                "git clone https://oauth2:s3cret@gitlab.example.com/g/p.git",
                "git clone https://oauth2:[REDACTED]@gitlab.example.com/g/p.git",
            ),
            (
                "postgres://app:pa%40ss@db:5432/x",
                "postgres://app:[REDACTED]@db:5432/x",
            ),
        ];
        for (input, expect) in table {
            check(&r, input, expect);
        }
    }

    #[test]
    fn near_misses_survive() {
        let r = bare();
        for text in [
            "let token = parse_token(x);",
            "let password_field = form.get(\"password\");",
            "password_field",
            "pub token: String,",
            "fn login(user: &str, password: &str) -> Result<Token, Error>",
            "token: Option<Token>,",
            "const TOKEN_WAKEUP: mio::Token = mio::Token(0);",
            "let f = move |token: CancellationToken| {",
            "/// [`CancellationToken::run_until_cancelled`]",
            "[`drop_guard`]: CancellationToken::drop_guard",
            "Win32::Security::Authorization::{SetSecurityInfo, SE_KERNEL_OBJECT},",
            "struct S { token: u64 }",
            "password: String",
            "if token.is_empty() { return; }",
            "TOKEN=$GITHUB_TOKEN",
            "password=${{ secrets.DB }}",
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
            "uuid 123e4567-e89b-12d3-a456-426614174000",
            "ghp_short",
            "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ", // too short
            "AKIAIOSFODNN7EXAMPL",            // 15 after the prefix
            "risk-management-framework-version",
            "sk-spinner-double-bounce-container", // no digit
            "task-0123456789abcdefghijklmno",
            "https://host:8080/path",
            "https://user@host/path",
            "the bearer of bad news",
            "Authorization: none",
            "PWD=/work/main",
            "OLDPWD=/tmp",
            "eyJhbGciOiJIUzI1NiJ9 alone",
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            "[REDACTED:github-token] API_KEY=[REDACTED] Authorization: [REDACTED]",
            "",
        ] {
            check(&r, text, text);
        }
    }

    #[test]
    fn a_token_inside_a_rejected_assignment_is_still_found() {
        check(
            &bare(),
            &format!("token=f({GHP})"),
            "token=f([REDACTED:github-token])",
        );
    }

    #[test]
    fn paths_at_component_boundaries() {
        let r = bare()
            .with_path(Path::new("/home/u"), "~")
            .with_path(Path::new("/home/u/repo/"), "<repo>");
        let table: &[(&str, &str)] = &[
            ("/home/u/repo/src/lib.rs:3", "<repo>/src/lib.rs:3"),
            ("/home/u/repo", "<repo>"),
            ("cd /home/u/repo-evil", "cd ~/repo-evil"),
            ("/home/u/.cargo/bin", "~/.cargo/bin"),
            ("/home/u2/x", "/home/u2/x"),
            ("/x/home/u/y", "/x/home/u/y"),
            ("PATH=/home/u/bin:/usr/bin", "PATH=~/bin:/usr/bin"),
            ("\"/home/u/repo\"", "\"<repo>\""),
            ("file:///home/u/repo/a", "file://<repo>/a"),
            ("/home/u.bak", "/home/u.bak"),
        ];
        for (input, expect) in table {
            check(&r, input, expect);
        }
    }

    #[test]
    fn canonical_spelling_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let r = bare().with_path(&link, "<repo>");
        let canonical = std::fs::canonicalize(&real).expect("canonical");
        let text = format!("{}/a and {}/b", link.display(), canonical.display());
        assert_eq!(r.redact(&text), "<repo>/a and <repo>/b");
    }

    #[test]
    fn secrets_and_root_paths() {
        let r = bare()
            .with_secret("gateway-token-0123456789")
            .with_secret("1")
            .with_path(Path::new("/"), "<root>");
        check(
            &r,
            "got gateway-token-0123456789 at /etc 1",
            "got [REDACTED:secret] at /etc 1",
        );
    }

    #[test]
    fn environment_rule() {
        for (name, value) in [
            ("GITLAB_TOKEN", "abcdefgh"),
            ("MY_API_KEY", "12345678"),
            ("SESSION_COOKIE", "abcdef0123"),
            ("RANDOM_THING", "Zq8xR2mN4vB7kL1pW9sT3yH6"),
        ] {
            assert!(env_value_is_secret(name, value), "{name}={value}");
        }
        for (name, value) in [
            ("LANG", "C.UTF-8"),
            ("SHLVL", "1"),
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("HOME", "/bin"),
            ("TERM", "xterm-256color"),
            ("PWD", "/work/main/some/long/dir"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-abc/agent.123"),
            ("GIT_COMMIT", "9fceb02d0ae598e95dc970b74767f19372d61af8"),
            ("INVOCATION_ID", "123e4567-e89b-12d3-a456-426614174000"),
            ("LS_COLORS", "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33"),
            ("API_KEY", "short"),
            ("EDITOR", "code --wait --new-window"),
        ] {
            assert!(!env_value_is_secret(name, value), "{name}={value}");
        }
    }

    #[test]
    fn new_redacts_home() {
        let Some(dirs) = directories::BaseDirs::new() else {
            return;
        };
        let home = dirs.home_dir().to_str().expect("utf-8 home").to_owned();
        if home == "/" {
            return;
        }
        assert_eq!(
            Redactor::new().redact(&format!("{home}/.ssh/id_ed25519")),
            "~/.ssh/id_ed25519"
        );
        assert_eq!(redact(&format!("{home}/x")), "~/x");
    }

    /// A tiny deterministic generator (xorshift), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[(self.next() % items.len() as u64) as usize]
        }
    }

    #[test]
    fn random_text_is_idempotent_and_never_panics() {
        let r = bare()
            .with_path(Path::new("/home/u"), "~")
            .with_path(Path::new("/home/u/repo"), "<repo>")
            .with_secret("s3cretValue99");
        let pieces = [
            "a",
            " ",
            "\n",
            "=",
            ":",
            "\"",
            "'",
            "/",
            "@",
            "-",
            ".",
            "(",
            ")",
            "~",
            "<",
            ">",
            "é",
            "日本",
            "🦀",
            "\u{0}",
            "\r",
            "token",
            "PASSWORD",
            "pwd",
            "Bearer ",
            "bearer",
            "Authorization: ",
            "https://",
            "u:",
            "/home/u",
            "/home/u/repo",
            "repo",
            "ghp_",
            GHP,
            "glpat-",
            "0123456789",
            "abcdefghijABCDEFGHIJ",
            "sk-",
            "sk-ant-",
            "eyJ",
            "eyJhbGciOi",
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----END RSA PRIVATE KEY-----",
            "AKIA",
            "IOSFODNN7EXAMPLE",
            "[REDACTED",
            "]",
            "s3cretValue99",
            "$",
            "{",
            ",",
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let n = (rng.next() % 24) as usize;
            let text: String = (0..n).map(|_| rng.pick(&pieces)).collect();
            let once = r.redact(&text).into_owned();
            let twice = r.redact(&once);
            assert_eq!(twice, once, "not idempotent for {text:?}");
            assert!(!once.contains(GHP), "{text:?} -> {once:?}");
            assert!(!once.contains("s3cretValue99"), "{text:?} -> {once:?}");
        }
    }
}
