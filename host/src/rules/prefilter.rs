//! Relaxed copies of rule patterns for a selection's `RegexSet` prefilter.
//!
//! The `regex` crate's fast lazy DFA cannot evaluate Unicode word boundaries (`\b`, `\B`,
//! `\<`, `\>`, `\b{start}`, ...) on non-ASCII text and falls back to a much slower engine for
//! the whole set on such lines (about 1000 times slower per line with the built-in rules). The
//! prefilter therefore uses each pattern with its Unicode word-boundary assertions removed.
//! Removing an assertion only widens what a pattern matches, so the relaxed set flags every
//! line the real patterns flag (and a few more); each candidate is then confirmed with the
//! rule's own regex, so results are exactly those of the real patterns.

use regex_syntax::hir::{Capture, Hir, HirKind, Look, Repetition};

/// `pattern` without Unicode word-boundary assertions, as a regex source string; the
/// original when it has none or cannot be parsed (a pattern that compiled always parses).
pub(super) fn relaxed(pattern: &str) -> String {
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return pattern.to_owned();
    };
    if !hir.properties().look_set().contains_word_unicode() {
        return pattern.to_owned();
    }
    strip(&hir).to_string()
}

fn strip(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(look) if is_unicode_word_look(*look) => Hir::empty(),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => hir.clone(),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            sub: Box::new(strip(&rep.sub)),
            ..rep.clone()
        }),
        HirKind::Capture(cap) => Hir::capture(Capture {
            sub: Box::new(strip(&cap.sub)),
            ..cap.clone()
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(strip).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(strip).collect()),
    }
}

fn is_unicode_word_look(look: Look) -> bool {
    matches!(
        look,
        Look::WordUnicode
            | Look::WordUnicodeNegate
            | Look::WordStartUnicode
            | Look::WordEndUnicode
            | Look::WordStartHalfUnicode
            | Look::WordEndHalfUnicode
    )
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::relaxed;

    fn check(pattern: &str, lines: &[&str]) {
        let real = Regex::new(pattern).expect("valid pattern");
        let relaxed_src = relaxed(pattern);
        let relaxed = Regex::new(&relaxed_src).expect("relaxed pattern compiles");
        for line in lines {
            if real.is_match(line) {
                assert!(relaxed.is_match(line), "{relaxed_src:?} misses {line:?}");
            }
        }
    }

    #[test]
    fn keeps_patterns_without_word_boundaries() {
        assert_eq!(relaxed(r"foo\(x\)"), r"foo\(x\)");
        assert_eq!(relaxed(r"(?-u:\b)foo"), r"(?-u:\b)foo");
        assert_eq!(relaxed(r"[\\b]"), r"[\\b]");
    }

    #[test]
    fn strips_word_boundaries_and_stays_a_superset() {
        let lines = [
            "password = 'x'",
            "mypassword",
            "naïve password é",
            "éAKIAZ3MSJV4WWNKWW5FG",
            " AKIAZ3MSJV4WWNKWW5FG ",
            "",
        ];
        for pattern in [
            r"\bpassword\b",
            r"(?i)\bPASS(?P<rest>word)\B",
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
            r"\<password\>|x\b{start}y",
            r"(\bfoo)+|é\b",
        ] {
            assert!(!relaxed(pattern).contains(r"\b"), "{pattern}");
            check(pattern, &lines);
        }
        assert!(
            Regex::new(&relaxed(r"\bpass\b"))
                .expect("ok")
                .is_match("mypassword")
        );
    }
}
