//! Finding fingerprints (DESIGN §5): stable across runs, rebases and line moves.

use sha2::{Digest, Sha256};

/// The fingerprint of a finding: `sha256:<64 lower-case hex digits>` over
/// `key` (the rule id, or the category when there is none), the repository-relative `path`,
/// the flagged lines with runs of whitespace collapsed to one space and ends trimmed, and —
/// only from the second identical occurrence in the same file on — the occurrence's ordinal.
///
/// Line numbers, run ids and timestamps never enter it, so the same code flagged by the same
/// rule keeps its fingerprint when it moves (rebase, lines inserted above) and across reruns.
/// The ordinal keeps two identical flagged lines in one file apart (DESIGN §5 leaves this open;
/// without it the second would be dropped as a duplicate); `occurrence` is 0 for the first.
pub fn fingerprint(key: &str, path: &str, flagged_lines: &[&str], occurrence: u32) -> String {
    let mut hasher = Sha256::new();
    // Fields are separated by NUL, which none of them can contain, so no two inputs collide by
    // shifting bytes between fields.
    hasher.update(key.as_bytes());
    hasher.update([0]);
    hasher.update(path.as_bytes());
    hasher.update([0]);
    hasher.update(normalize(flagged_lines).as_bytes());
    if occurrence > 0 {
        hasher.update([0]);
        hasher.update(occurrence.to_string().as_bytes());
    }
    let digest = hasher.finalize();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Lines joined by `\n`, each with whitespace runs collapsed to one space and trimmed.
pub fn normalize(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_and_position_do_not_matter() {
        let a = fingerprint("secrets.aws", "src/a.py", &["key = 'AKIA'  "], 0);
        let b = fingerprint("secrets.aws", "src/a.py", &["\tkey  =  'AKIA'"], 0);
        assert_eq!(a, b);
        assert!(a.starts_with("sha256:") && a.len() == 71);
    }

    #[test]
    fn rule_path_text_and_occurrence_do() {
        let base = fingerprint("r", "p", &["x"], 0);
        assert_ne!(base, fingerprint("r2", "p", &["x"], 0));
        assert_ne!(base, fingerprint("r", "p2", &["x"], 0));
        assert_ne!(base, fingerprint("r", "p", &["y"], 0));
        assert_ne!(base, fingerprint("r", "p", &["x"], 1));
        assert_ne!(
            fingerprint("ab", "c", &["x"], 0),
            fingerprint("a", "bc", &["x"], 0)
        );
    }
}
