//! [`GlobList`]: path globs matched together in one pass, compiled in time linear in their
//! length.
//!
//! globset's own `GlobSet` picks a strategy per glob, and sends a glob that is a literal
//! followed by `/**` (or, when `*` crosses `/`, by `*`) to an Aho-Corasick automaton whose
//! construction grows with the square of the literal's length: one 30 KB `scope.filePaths`
//! entry of a review took 20 CPU-seconds (issue 12). A `GlobList` uses globset only to parse
//! each glob into its regular expression (so the glob syntax is globset's) and matches them all
//! with one `regex::bytes::RegexSet`. Callers also cap the globs' number and length
//! ([`crate::tools::check_glob_caps`]).

/// Globs matched together; see the module docs.
#[derive(Debug, Clone)]
pub struct GlobList {
    set: regex::bytes::RegexSet,
}

impl GlobList {
    /// Compile `globs` (as built by `globset::GlobBuilder`, whose options — e.g.
    /// `literal_separator` — are kept) into one set.
    ///
    /// # Errors
    /// The regex crate's error when the compiled set would exceed its size limit (10 MiB;
    /// globs within [`crate::tools::check_glob_caps`] stay far below it).
    pub fn new(globs: &[globset::Glob]) -> Result<GlobList, regex::Error> {
        let set = regex::bytes::RegexSetBuilder::new(globs.iter().map(globset::Glob::regex))
            .dot_matches_new_line(true)
            .build()?;
        Ok(GlobList { set })
    }

    /// Whether any glob matches all of `path` (repository-relative, '/'-separated).
    pub fn is_match(&self, path: &str) -> bool {
        self.set.is_match(path.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(globs: &[&str], literal_separator: bool) -> GlobList {
        let globs: Vec<globset::Glob> = globs
            .iter()
            .map(|g| {
                globset::GlobBuilder::new(g)
                    .literal_separator(literal_separator)
                    .build()
                    .expect("glob")
            })
            .collect();
        GlobList::new(&globs).expect("set")
    }

    #[test]
    fn matches_as_globset_does() {
        let cases: [(&[&str], bool, &str, bool); 10] = [
            (&["src/**"], true, "src/a/b.rs", true),
            (&["src/**"], true, "srcx/a.rs", false),
            (&["src/*.rs"], true, "src/a/b.rs", false),
            (&["src/*.rs"], false, "src/a/b.rs", true),
            (&["**/*.java"], true, "a/b/C.java", true),
            (&["**/*.java"], true, "C.java", true),
            (&["*.toml", "docs/**"], true, "docs/x.md", true),
            (&["a?c"], true, "abc", true),
            (&["[ab].py"], true, "c.py", false),
            (&["{x,y}/z"], true, "y/z", true),
        ];
        for (globs, sep, path, expect) in cases {
            assert_eq!(list(globs, sep).is_match(path), expect, "{globs:?} {path}");
            let mut set = globset::GlobSetBuilder::new();
            for g in globs {
                set.add(
                    globset::GlobBuilder::new(g)
                        .literal_separator(sep)
                        .build()
                        .expect("glob"),
                );
            }
            let set = set.build().expect("set");
            assert_eq!(
                set.is_match(path),
                expect,
                "globset agrees: {globs:?} {path}"
            );
        }
    }
}
