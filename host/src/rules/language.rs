//! [`Language`] and [`language_of`]: which language a repository path holds, decided from its
//! file name alone (no content sniffing, so the answer is deterministic and costs nothing).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A source or configuration language a rule can be restricted to (`languages = [...]`).
///
/// The rule-file and wire spelling is [`Language::as_str`] (`"python"`, `"csharp"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Language {
    /// `.py`, `.pyi`, `.pyw`.
    Python,
    /// `.js`, `.jsx`, `.mjs`, `.cjs`.
    JavaScript,
    /// `.ts`, `.tsx`, `.mts`, `.cts`.
    TypeScript,
    /// `.go`.
    Go,
    /// `.java`.
    Java,
    /// `.kt`, `.kts`.
    Kotlin,
    /// `.scala`, `.sc`.
    Scala,
    /// `.rs`.
    Rust,
    /// `.rb`, `.rake`, `.gemspec`, `.ru`, `.jbuilder`; `Gemfile`, `Rakefile`, ...
    Ruby,
    /// `.php`, `.phtml` (not `.blade.php`: [`Language::Blade`]).
    Php,
    /// `.cs`, `.csx`.
    CSharp,
    /// `.swift`.
    Swift,
    /// `.sh`, `.bash`, `.zsh`, `.ksh`; `.bashrc`, `.zshrc`, `.profile`.
    Shell,
    /// `.ps1`, `.psm1`, `.psd1`.
    PowerShell,
    /// `.c`, `.h`.
    C,
    /// `.cc`, `.cpp`, `.cxx`, `.c++`, `.hh`, `.hpp`, `.hxx`, `.h++`.
    Cpp,
    /// `.sql`.
    Sql,
    /// `.html`, `.htm`.
    Html,
    /// `.vue` single-file components.
    Vue,
    /// `.svelte` components.
    Svelte,
    /// `.md`, `.markdown`.
    Markdown,
    /// `.yml`, `.yaml`.
    Yaml,
    /// `.json`, `.jsonc`.
    Json,
    /// `.toml`.
    Toml,
    /// `.xml`.
    Xml,
    /// `Dockerfile`, `Dockerfile.*`, `*.dockerfile`, `Containerfile`.
    Dockerfile,
    /// `.tf`, `.tfvars`, `.hcl`.
    Terraform,
    /// `.ini`, `.cfg`.
    Ini,
    /// `.properties`.
    Properties,
    /// `.env`, `.env.*`, `*.env`.
    Dotenv,
    /// ERB templates (Rails views): `.erb`, so `.html.erb` too.
    Erb,
    /// EJS templates: `.ejs`.
    Ejs,
    /// Jinja templates: `.j2`, `.jinja`, `.jinja2`.
    Jinja,
    /// Laravel Blade templates: `.blade.php`.
    Blade,
    /// Go `text/template` / `html/template` files: `.tmpl`, `.gohtml`.
    GoTemplate,
}

impl Language {
    /// Every language, in declaration order.
    pub const ALL: &'static [Language] = &[
        Language::Python,
        Language::JavaScript,
        Language::TypeScript,
        Language::Go,
        Language::Java,
        Language::Kotlin,
        Language::Scala,
        Language::Rust,
        Language::Ruby,
        Language::Php,
        Language::CSharp,
        Language::Swift,
        Language::Shell,
        Language::PowerShell,
        Language::C,
        Language::Cpp,
        Language::Sql,
        Language::Html,
        Language::Vue,
        Language::Svelte,
        Language::Markdown,
        Language::Yaml,
        Language::Json,
        Language::Toml,
        Language::Xml,
        Language::Dockerfile,
        Language::Terraform,
        Language::Ini,
        Language::Properties,
        Language::Dotenv,
        Language::Erb,
        Language::Ejs,
        Language::Jinja,
        Language::Blade,
        Language::GoTemplate,
    ];

    /// The lower-case name used in rule files and on the wire, e.g. `"python"`, `"csharp"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Go => "go",
            Language::Java => "java",
            Language::Kotlin => "kotlin",
            Language::Scala => "scala",
            Language::Rust => "rust",
            Language::Ruby => "ruby",
            Language::Php => "php",
            Language::CSharp => "csharp",
            Language::Swift => "swift",
            Language::Shell => "shell",
            Language::PowerShell => "powershell",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Sql => "sql",
            Language::Html => "html",
            Language::Vue => "vue",
            Language::Svelte => "svelte",
            Language::Markdown => "markdown",
            Language::Yaml => "yaml",
            Language::Json => "json",
            Language::Toml => "toml",
            Language::Xml => "xml",
            Language::Dockerfile => "dockerfile",
            Language::Terraform => "terraform",
            Language::Ini => "ini",
            Language::Properties => "properties",
            Language::Dotenv => "dotenv",
            Language::Erb => "erb",
            Language::Ejs => "ejs",
            Language::Jinja => "jinja",
            Language::Blade => "blade",
            Language::GoTemplate => "gotemplate",
        }
    }
}

/// The error of [`Language::from_str`]: the name is not one of [`Language::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language `{name}`, expected one of: {}", known_names())]
pub struct UnknownLanguage {
    /// The name as given.
    pub name: String,
}

fn known_names() -> String {
    Language::ALL
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Language {
    type Err = UnknownLanguage;

    /// Parses the exact lower-case name of [`Language::as_str`].
    ///
    /// # Errors
    /// [`UnknownLanguage`] for any other string (the message lists the known names).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Language::ALL
            .iter()
            .copied()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLanguage { name: s.to_owned() })
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Language {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// The language of a repository path, decided from its file name; `None` when unknown.
///
/// Takes a `/`-separated (or `\`-separated) path; only the last component matters. Extensions
/// are compared case-insensitively. Well-known extensionless names are recognised too:
/// `Dockerfile`/`Containerfile` (and `Dockerfile.*`), `Gemfile`, `Rakefile` and other Ruby
/// DSL files, shell start-up files (`.bashrc`, `.zshrc`, `.profile`, ...), and `.env` /
/// `.env.*` files. A `.h` header counts as C. Templates are languages of their own, not their
/// host language's: `.erb` is [`Language::Erb`], `.blade.php` [`Language::Blade`] (the one
/// two-part extension recognised).
pub fn language_of(path: &str) -> Option<Language> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    if let Some(lang) = by_file_name(&lower) {
        return Some(lang);
    }
    let (stem, ext) = lower.rsplit_once('.')?;
    if stem.is_empty() {
        // A dot file like `.gitignore`: the "extension" is the whole name.
        return None;
    }
    by_extension(ext)
}

fn by_file_name(lower: &str) -> Option<Language> {
    let lang = match lower {
        "dockerfile" | "containerfile" => Language::Dockerfile,
        "gemfile" | "rakefile" | "guardfile" | "podfile" | "vagrantfile" | "brewfile"
        | "fastfile" | "appfile" | "capfile" | "berksfile" => Language::Ruby,
        ".bashrc" | ".bash_profile" | ".bash_login" | ".bash_logout" | ".zshrc" | ".zshenv"
        | ".zprofile" | ".profile" | ".kshrc" => Language::Shell,
        ".env" => Language::Dotenv,
        _ if lower.starts_with("dockerfile.") => Language::Dockerfile,
        _ if lower.starts_with(".env.") => Language::Dotenv,
        _ if lower.ends_with(".blade.php") && lower.len() > ".blade.php".len() => Language::Blade,
        _ => return None,
    };
    Some(lang)
}

fn by_extension(ext: &str) -> Option<Language> {
    let lang = match ext {
        "py" | "pyi" | "pyw" => Language::Python,
        "js" | "jsx" | "mjs" | "cjs" => Language::JavaScript,
        "ts" | "tsx" | "mts" | "cts" => Language::TypeScript,
        "go" => Language::Go,
        "java" => Language::Java,
        "kt" | "kts" => Language::Kotlin,
        "scala" | "sc" => Language::Scala,
        "rs" => Language::Rust,
        "rb" | "rake" | "gemspec" | "ru" | "jbuilder" => Language::Ruby,
        "php" | "phtml" => Language::Php,
        "cs" | "csx" => Language::CSharp,
        "swift" => Language::Swift,
        "sh" | "bash" | "zsh" | "ksh" => Language::Shell,
        "ps1" | "psm1" | "psd1" => Language::PowerShell,
        "c" | "h" => Language::C,
        "cc" | "cpp" | "cxx" | "c++" | "hh" | "hpp" | "hxx" | "h++" => Language::Cpp,
        "sql" => Language::Sql,
        "html" | "htm" => Language::Html,
        "vue" => Language::Vue,
        "svelte" => Language::Svelte,
        "md" | "markdown" => Language::Markdown,
        "yml" | "yaml" => Language::Yaml,
        "json" | "jsonc" => Language::Json,
        "toml" => Language::Toml,
        "xml" => Language::Xml,
        "dockerfile" => Language::Dockerfile,
        "tf" | "tfvars" | "hcl" => Language::Terraform,
        "ini" | "cfg" => Language::Ini,
        "properties" => Language::Properties,
        "env" => Language::Dotenv,
        "erb" => Language::Erb,
        "ejs" => Language::Ejs,
        "j2" | "jinja" | "jinja2" => Language::Jinja,
        "tmpl" | "gohtml" => Language::GoTemplate,
        _ => return None,
    };
    Some(lang)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(path: &str, expect: Option<&str>) {
        assert_eq!(
            language_of(path).map(Language::as_str),
            expect,
            "path {path:?}"
        );
    }

    #[test]
    fn languages_by_path() {
        check("src/app.py", Some("python"));
        check("a/b/C.JAVA", Some("java"));
        check("web/x.tsx", Some("typescript"));
        check("web/x.mjs", Some("javascript"));
        check("cmd/main.go", Some("go"));
        check("src/lib.rs", Some("rust"));
        check("Gemfile", Some("ruby"));
        check("lib/tasks/db.rake", Some("ruby"));
        check("include/x.h", Some("c"));
        check("src/x.hpp", Some("cpp"));
        check("deploy/Dockerfile", Some("dockerfile"));
        check("deploy/Dockerfile.prod", Some("dockerfile"));
        check("app.dockerfile", Some("dockerfile"));
        check(".env", Some("dotenv"));
        check("config/.env.production", Some("dotenv"));
        check("prod.env", Some("dotenv"));
        check("home/.bashrc", Some("shell"));
        check("C:\\repo\\x.cs", Some("csharp"));
        check(".github/workflows/ci.yml", Some("yaml"));
        check("infra/main.tf", Some("terraform"));
        check("app/views/users/show.html.erb", Some("erb"));
        check("views/app/products.ejs", Some("ejs"));
        check("templates/base.jinja2", Some("jinja"));
        check("roles/x/templates/nginx.conf.j2", Some("jinja"));
        check("t/page.jinja", Some("jinja"));
        check("resources/views/home.blade.php", Some("blade"));
        check("app/Http/Home.php", Some("php"));
        check("x/.blade.php", Some("php"));
        check("web/templates/index.gohtml", Some("gotemplate"));
        check("web/templates/mail.TMPL", Some("gotemplate"));
        check("README", None);
        check(".gitignore", None);
        check("archive.tar.gz", None);
        check("", None);
    }

    #[test]
    fn names_round_trip() {
        for lang in Language::ALL {
            assert_eq!(lang.as_str().parse::<Language>(), Ok(*lang));
            assert_eq!(lang.to_string(), lang.as_str());
        }
        let err = "Python"
            .parse::<Language>()
            .expect_err("names are lower-case");
        assert!(err.to_string().contains("unknown language `Python`"));
        assert!(err.to_string().contains("python, javascript"));
    }
}
