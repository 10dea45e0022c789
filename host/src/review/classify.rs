//! Files a review leaves out because their code is not the merge request author's to fix:
//! vendored libraries, minified bundles, generated code, and documentation pages (whose code
//! samples show vulnerable code on purpose). Each is listed in `skippedFiles` with its reason,
//! never dropped silently (issue 16); a file the request names in its `paths` is reviewed
//! anyway.
//!
//! Decided from the path and the file's new-side lines alone, so the answer is deterministic
//! and costs one pass over at most the first lines of the file.

/// Directory names whose contents are third-party code kept in the repository.
const VENDORED_DIRS: &[&str] = &[
    "vendor",
    "vendors",
    "node_modules",
    "bower_components",
    "jspm_packages",
    "third_party",
    "third-party",
    "thirdparty",
    "3rdparty",
    "site-packages",
    "Pods",
    "Carthage",
];

/// Well-known browser libraries, as the start of a file name (`jquery-3.2.1.js`,
/// `bootstrap.bundle.js`), when the name goes on with a version or a variant.
const VENDORED_LIBRARIES: &[&str] = &[
    "jquery-ui",
    "jquery",
    "bootstrap",
    "angular",
    "react-dom",
    "react",
    "vue",
    "lodash",
    "underscore",
    "moment",
    "d3",
    "materialize",
    "popper",
    "backbone",
    "handlebars",
    "knockout",
    "modernizr",
    "require",
    "socket.io",
    "chart",
    "highlight",
    "prism",
    "codemirror",
    "tinymce",
    "ckeditor",
    "foundation",
    "semantic",
    "axios",
];

/// Directory names whose pages ([`is_page`]) document or teach (tutorials, guides) rather
/// than run.
const DOCUMENTATION_DIRS: &[&str] = &[
    "docs",
    "doc",
    "documentation",
    "tutorial",
    "tutorials",
    "guide",
    "guides",
    "learn",
    "wiki",
];

/// Lock files and other files tools write.
const GENERATED_NAMES: &[&str] = &[
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "Cargo.lock",
    "poetry.lock",
    "Pipfile.lock",
    "Gemfile.lock",
    "composer.lock",
    "go.sum",
    "packages.lock.json",
];

/// A line longer than this, in a file whose lines average more than [`MINIFIED_AVERAGE`]
/// bytes, marks a minified file.
const MINIFIED_LINE: usize = 1000;
/// See [`MINIFIED_LINE`].
const MINIFIED_AVERAGE: usize = 200;
/// How many leading lines are searched for a "generated" marker.
const GENERATED_HEADER_LINES: usize = 10;

/// Why the file at `path` (repository-relative, `/`-separated) with these new-side `lines` is
/// not reviewed: `(reason, detail)` with reason `vendored`, `minified`, `generated` or
/// `documentation`; `None` for a file to review.
pub fn not_reviewed(path: &str, lines: &[String]) -> Option<(&'static str, String)> {
    let path = path.strip_prefix("./").unwrap_or(path);
    let (dirs, name) = match path.rsplit_once('/') {
        Some((dirs, name)) => (dirs, name),
        None => ("", path),
    };
    let lower = name.to_ascii_lowercase();
    if let Some(dir) = dirs.split('/').find(|d| VENDORED_DIRS.contains(d)) {
        return Some(("vendored", format!("third-party code (under `{dir}/`)")));
    }
    if let Some(library) = vendored_library(&lower) {
        return Some((
            "vendored",
            format!("a copy of the {library} library (by its file name)"),
        ));
    }
    if lower.contains(".min.") || lower.ends_with("-min.js") || lower.ends_with(".map") {
        return Some((
            "minified",
            "minified or source-map file (by its name)".into(),
        ));
    }
    if GENERATED_NAMES.contains(&name) {
        return Some((
            "generated",
            "a lock file written by a package manager".into(),
        ));
    }
    if lower.ends_with(".pb.go")
        || lower.ends_with("_pb2.py")
        || lower.ends_with("_pb2_grpc.py")
        || lower.contains(".generated.")
        || lower.ends_with(".g.dart")
        || lower.ends_with(".designer.cs")
    {
        return Some(("generated", "generated code (by its file name)".into()));
    }
    if let Some(marker) = generated_marker(lines) {
        return Some((
            "generated",
            format!("generated code (its header says {marker:?})"),
        ));
    }
    if is_minified(lines) {
        return Some((
            "minified",
            format!(
                "minified (a line over {MINIFIED_LINE} bytes, lines averaging over \
                 {MINIFIED_AVERAGE})"
            ),
        ));
    }
    if let Some(dir) = dirs
        .split('/')
        .find(|d| DOCUMENTATION_DIRS.contains(&d.to_ascii_lowercase().as_str()))
        .filter(|_| is_page(&lower))
    {
        return Some((
            "documentation",
            format!("a documentation page (under `{dir}/`), whose code samples are not run"),
        ));
    }
    None
}

/// A rendered page (HTML or a template of it), the form tutorials and documentation take.
/// Code files and Markdown under a documentation directory are still reviewed: Sphinx's
/// `conf.py` is code, and a token pasted into a Markdown page is still leaked.
fn is_page(lower_name: &str) -> bool {
    const PAGES: &[&str] = &[
        ".html",
        ".htm",
        ".xhtml",
        ".ejs",
        ".erb",
        ".hbs",
        ".handlebars",
        ".mustache",
        ".pug",
        ".jade",
        ".twig",
        ".j2",
        ".jinja",
        ".jinja2",
        ".njk",
        ".liquid",
        ".vue",
    ];
    PAGES.iter().any(|ext| lower_name.ends_with(ext))
}

fn vendored_library(lower_name: &str) -> Option<&'static str> {
    if !(lower_name.ends_with(".js") || lower_name.ends_with(".css")) {
        return None;
    }
    VENDORED_LIBRARIES.iter().copied().find(|lib| {
        lower_name.strip_prefix(lib).is_some_and(|rest| {
            // `jquery.js`, `jquery-3.2.1.js`, `bootstrap.bundle.js`, but not `required.js`
            // or `chartsController.js`.
            rest.starts_with('.')
                || rest.starts_with('-') && rest[1..].starts_with(|c: char| c.is_ascii_digit())
        })
    })
}

fn generated_marker(lines: &[String]) -> Option<&'static str> {
    for line in lines.iter().take(GENERATED_HEADER_LINES) {
        let lower = line.to_ascii_lowercase();
        if lower.contains("code generated") && lower.contains("do not edit") {
            return Some("Code generated … DO NOT EDIT");
        }
        if lower.contains("@generated") {
            return Some("@generated");
        }
        if (lower.contains("auto-generated") || lower.contains("autogenerated"))
            && (lower.contains("do not edit") || lower.contains("do not modify"))
        {
            return Some("auto-generated, do not edit");
        }
    }
    None
}

fn is_minified(lines: &[String]) -> bool {
    if lines.is_empty() || !lines.iter().any(|l| l.len() > MINIFIED_LINE) {
        return false;
    }
    let total: usize = lines.iter().map(String::len).sum();
    total / lines.len() > MINIFIED_AVERAGE
}

#[cfg(test)]
mod tests {
    use super::not_reviewed;

    fn reason(path: &str, lines: &[&str]) -> Option<&'static str> {
        let lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        not_reviewed(path, &lines).map(|(reason, _)| reason)
    }

    #[test]
    fn vendored_minified_generated_and_documentation_are_recognised() {
        let code = ["const a = 1;"];
        assert_eq!(reason("vendor/github.com/x/y.go", &code), Some("vendored"));
        assert_eq!(
            reason("web/node_modules/lodash/index.js", &code),
            Some("vendored")
        );
        assert_eq!(reason("static/js/jquery-3.2.1.js", &code), Some("vendored"));
        assert_eq!(
            reason("static/js/bootstrap.bundle.js", &code),
            Some("vendored")
        );
        assert_eq!(reason("static/app.min.js", &code), Some("minified"));
        assert_eq!(reason("static/app.js.map", &code), Some("minified"));
        let long = "x".repeat(5000);
        assert_eq!(reason("static/app.js", &[&long]), Some("minified"));
        assert_eq!(reason("package-lock.json", &code), Some("generated"));
        assert_eq!(reason("api/v1/api.pb.go", &code), Some("generated"));
        assert_eq!(
            reason(
                "gen/x.go",
                &[
                    "// Code generated by protoc-gen-go. DO NOT EDIT.",
                    "package x"
                ]
            ),
            Some("generated")
        );
        assert_eq!(
            reason("docs/tutorial/sql.html", &code),
            Some("documentation")
        );
        assert_eq!(
            reason("views/learn/vulnerabilities/a1.ejs", &code),
            Some("documentation")
        );
    }

    #[test]
    fn ordinary_code_is_reviewed() {
        let code = ["const a = 1;"];
        for path in [
            "src/app.js",
            "static/js/required.js",
            "static/js/chartsController.js",
            "app/vendors_controller.rb",
            "src/documents/handler.py",
            "docs/conf.py",
            "docs/setup.md",
            "README.md",
            "lib/react_helpers.rb",
            "src/react-app.js",
        ] {
            assert_eq!(reason(path, &code), None, "{path}");
        }
        // Long lines alone (a data table) are not minification.
        let mut lines = vec!["x".repeat(1500)];
        lines.extend((0..100).map(|i| format!("line {i}")));
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        assert_eq!(reason("src/table.js", &lines), None);
    }
}
