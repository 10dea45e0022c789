//! Edits of `[[mappings]]` that keep the rest of the file — comments, order, formatting — as the
//! user wrote it (`toml_edit`), written atomically with mode 0600.

use std::path::Path;

use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use super::file::{check_project_path, check_ref};
use super::{Config, ConfigError, Mapping, normalize_origin};
use crate::security::fs::{IfExists, write_private};

/// Add a confirmed mapping to the config file at `path` (created if missing), keeping everything
/// else in the file as it is (draft §6, DESIGN §6).
///
/// The origin is stored in normal form and the project path without surrounding `/`. Checking
/// that `local_path` is a git repository is the caller's job (the CLI opens it with
/// [`crate::repo::Repository::open`]); this checks that it is an absolute path to a directory.
///
/// # Errors
/// - [`ConfigError::InvalidMapping`]: bad origin, project path, relative or non-UTF-8
///   `local_path`, or bad `default_ref`;
/// - [`ConfigError::LocalPathMissing`]: `local_path` does not exist or is not a directory;
/// - [`ConfigError::Read`] / [`ConfigError::Invalid`] / [`ConfigError::SecretInConfig`]: the
///   existing file cannot be read or does not check (it is not edited then);
/// - [`ConfigError::DuplicateMapping`]: the file already maps this origin and project;
/// - [`ConfigError::Write`]: the new file cannot be written.
pub fn add_mapping(path: &Path, mapping: Mapping) -> Result<(), ConfigError> {
    let origin = normalize_origin(&mapping.gitlab_origin).map_err(|message| {
        ConfigError::InvalidMapping {
            field: "gitlab_origin",
            message: format!("invalid origin `{}`: {message}", mapping.gitlab_origin),
        }
    })?;
    let project = check_project_path(&mapping.project_path).map_err(|message| {
        ConfigError::InvalidMapping {
            field: "project_path",
            message,
        }
    })?;
    check_ref(&mapping.default_ref).map_err(|message| ConfigError::InvalidMapping {
        field: "default_ref",
        message,
    })?;
    let local = &mapping.local_path;
    if !local.is_absolute() {
        return Err(ConfigError::InvalidMapping {
            field: "local_path",
            message: format!("`{}` is not an absolute path", local.display()),
        });
    }
    let local_str = local.to_str().ok_or_else(|| ConfigError::InvalidMapping {
        field: "local_path",
        message: format!(
            "`{}` is not valid UTF-8 and cannot be written to TOML",
            local.display()
        ),
    })?;
    match std::fs::metadata(local) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(ConfigError::LocalPathMissing {
                local_path: local.clone(),
                problem: "is not a directory",
            });
        }
        Err(_) => {
            return Err(ConfigError::LocalPathMissing {
                local_path: local.clone(),
                problem: "does not exist",
            });
        }
    }

    let text = read_or_empty(path)?;
    let config = Config::parse(&text, path)?;
    if config.find_mapping(&origin, &project).is_some() {
        return Err(ConfigError::DuplicateMapping {
            path: path.to_owned(),
            gitlab_origin: origin,
            project_path: project,
        });
    }
    let mut doc = parse_mut(&text, path)?;
    let fields = [
        ("gitlab_origin", origin.as_str()),
        ("project_path", project.as_str()),
        ("local_path", local_str),
        ("default_ref", mapping.default_ref.as_str()),
    ];
    match doc.get_mut("mappings") {
        // `mappings = [{ ... }]`: stay in the user's style.
        Some(Item::Value(Value::Array(array))) => {
            let mut entry = InlineTable::new();
            for (k, v) in fields {
                entry.insert(k, Value::from(v));
            }
            array.push(entry);
        }
        Some(Item::ArrayOfTables(array)) => array.push(new_table(&fields)),
        Some(_) => {
            // Config::parse accepted the file, so `mappings` is an array; an empty one written
            // as `mappings = []` is the only other form.
            let mut array = ArrayOfTables::new();
            array.push(new_table(&fields));
            doc.insert("mappings", Item::ArrayOfTables(array));
        }
        None => {
            let mut array = ArrayOfTables::new();
            array.push(new_table(&fields));
            doc.insert("mappings", Item::ArrayOfTables(array));
        }
    }
    write_checked(path, &doc.to_string())
}

/// Remove the mapping of `gitlab_origin` + `project_path` (compared as
/// [`Config::find_mapping`] does) from the config file at `path`, keeping everything else.
///
/// Returns `true` if a mapping was removed, `false` if there was none (the file is then not
/// written; a missing file has no mappings).
///
/// # Errors
/// [`ConfigError::Read`], [`ConfigError::Invalid`], [`ConfigError::SecretInConfig`] when the
/// file cannot be read or does not check; [`ConfigError::Write`].
pub fn remove_mapping(
    path: &Path,
    gitlab_origin: &str,
    project_path: &str,
) -> Result<bool, ConfigError> {
    let text = read_or_empty(path)?;
    let Some(index) = mapping_index(&text, path, gitlab_origin, project_path)? else {
        return Ok(false);
    };
    let mut doc = parse_mut(&text, path)?;
    // The document's entries are in file order, as are `config.mappings`.
    match doc.get_mut("mappings") {
        Some(Item::ArrayOfTables(array)) if index < array.len() => {
            array.remove(index);
        }
        Some(Item::Value(Value::Array(array))) if index < array.len() => {
            array.remove(index);
        }
        _ => return Ok(false),
    }
    write_checked(path, &doc.to_string())?;
    Ok(true)
}

/// Set the `default_ref` of the mapping of `gitlab_origin` + `project_path` (compared as
/// [`Config::find_mapping`] does) in the config file at `path`, keeping everything else.
/// Checking that the ref resolves in the repository is the caller's job
/// ([`super::checked_default_ref`]).
///
/// Returns `false` when there is no such mapping (the file is not written).
///
/// # Errors
/// [`ConfigError::InvalidMapping`] for a malformed ref; [`ConfigError::Read`],
/// [`ConfigError::Invalid`], [`ConfigError::SecretInConfig`] when the file cannot be read or
/// does not check; [`ConfigError::Write`].
pub fn set_default_ref(
    path: &Path,
    gitlab_origin: &str,
    project_path: &str,
    default_ref: &str,
) -> Result<bool, ConfigError> {
    check_ref(default_ref).map_err(|message| ConfigError::InvalidMapping {
        field: "default_ref",
        message,
    })?;
    let text = read_or_empty(path)?;
    let Some(index) = mapping_index(&text, path, gitlab_origin, project_path)? else {
        return Ok(false);
    };
    let mut doc = parse_mut(&text, path)?;
    match doc.get_mut("mappings") {
        Some(Item::ArrayOfTables(array)) if index < array.len() => {
            if let Some(table) = array.get_mut(index) {
                table.insert("default_ref", toml_edit::value(default_ref));
            }
        }
        Some(Item::Value(Value::Array(array))) if index < array.len() => {
            if let Some(Value::InlineTable(table)) = array.get_mut(index) {
                table.insert("default_ref", Value::from(default_ref));
            }
        }
        _ => return Ok(false),
    }
    write_checked(path, &doc.to_string())?;
    Ok(true)
}

/// Add `origin` (normalized) to the top-level `allowed_origins` of the config file at `path`
/// (created when missing), keeping everything else. Returns `false` when it is there already
/// (the file is not written).
///
/// # Errors
/// [`ConfigError::InvalidMapping`] (field `allowed_origins`) for a value that is not an origin
/// such as `https://gitlab.example.com`; [`ConfigError::Read`], [`ConfigError::Invalid`],
/// [`ConfigError::SecretInConfig`], [`ConfigError::Write`].
pub fn add_allowed_origin(path: &Path, origin: &str) -> Result<bool, ConfigError> {
    let origin = normalize_origin(origin.trim().trim_end_matches('/')).map_err(|message| {
        ConfigError::InvalidMapping {
            field: "allowed_origins",
            message: format!("invalid origin `{}`: {message}", origin.trim()),
        }
    })?;
    let text = read_or_empty(path)?;
    let config = Config::parse(&text, path)?;
    if config.allowed_origins.contains(&origin) {
        return Ok(false);
    }
    let mut doc = parse_mut(&text, path)?;
    match doc.get_mut("allowed_origins") {
        Some(Item::Value(Value::Array(array))) => array.push(origin.as_str()),
        _ => {
            let mut array = toml_edit::Array::new();
            array.push(origin.as_str());
            // A new top-level key goes before the first table (a key below a table would
            // belong to it).
            doc.insert("allowed_origins", Item::Value(Value::Array(array)));
        }
    }
    write_checked(path, &doc.to_string())?;
    Ok(true)
}

/// Remove `origin` (compared in normal form) from `allowed_origins` of the config file at
/// `path`. Returns `false` when it is not there (the file is not written). The origins of
/// confirmed mappings are allowed by the mappings themselves and are not in this list.
///
/// # Errors
/// As [`add_allowed_origin`].
pub fn remove_allowed_origin(path: &Path, origin: &str) -> Result<bool, ConfigError> {
    let wanted = normalize_origin(origin.trim().trim_end_matches('/')).unwrap_or_default();
    let text = read_or_empty(path)?;
    Config::parse(&text, path)?;
    let mut doc = parse_mut(&text, path)?;
    let Some(Item::Value(Value::Array(array))) = doc.get_mut("allowed_origins") else {
        return Ok(false);
    };
    let before = array.len();
    array.retain(|v| {
        v.as_str()
            .and_then(|o| normalize_origin(o.trim_end_matches('/')).ok())
            .is_none_or(|o| o != wanted)
    });
    if array.len() == before {
        return Ok(false);
    }
    write_checked(path, &doc.to_string())?;
    Ok(true)
}

/// The position among `[[mappings]]` (file order, as the document's entries) of the mapping
/// of `gitlab_origin` + `project_path` in the config `text` (compared as
/// [`Config::find_mapping`] does); `None` when there is none.
fn mapping_index(
    text: &str,
    path: &Path,
    gitlab_origin: &str,
    project_path: &str,
) -> Result<Option<usize>, ConfigError> {
    let config = Config::parse(text, path)?;
    Ok(config
        .find_mapping(gitlab_origin, project_path)
        .and_then(|target| config.mappings.iter().position(|m| m == target)))
}

fn new_table(fields: &[(&str, &str)]) -> Table {
    let mut table = Table::new();
    for (k, v) in fields {
        table.insert(k, toml_edit::value(*v));
    }
    table
}

fn read_or_empty(path: &Path) -> Result<String, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(ConfigError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

fn parse_mut(text: &str, path: &Path) -> Result<DocumentMut, ConfigError> {
    text.parse::<DocumentMut>()
        .map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            key: None,
            line: 1,
            column: 1,
            message: e.message().trim_end().to_owned(),
        })
}

/// Check the edited text as a config once more, then write it.
fn write_checked(path: &Path, text: &str) -> Result<(), ConfigError> {
    Config::parse(text, path)?;
    write_private(path, text.as_bytes(), IfExists::Replace).map_err(|source| ConfigError::Write {
        path: path.to_owned(),
        source,
    })
}
