//! Turning a browser's mapping proposal into a confirmed mapping (DESIGN §6): the one check
//! shared by `review-agent-gateway mappings add|confirm` and the settings page's Confirm button
//! (issue 18 §2) — the path must be an existing git repository (work tree or bare) and the
//! default ref must resolve there (or one is picked, issue 12 §5).

use std::path::{Path, PathBuf};

use super::{Config, ConfigError, Mapping, add_mapping};
use crate::error::{GatewayError, codes};
use crate::store::MappingProposal;

/// What [`confirm_proposal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    /// The mapping in the config file now.
    pub mapping: Mapping,
    /// `true` when the file already held this mapping (nothing was written).
    pub already: bool,
    /// Why the default ref was picked when the proposal named none, e.g.
    /// `, the checked-out branch`; empty otherwise.
    pub why: String,
}

/// Confirm `proposal` into the config file `config_path` (created when missing): its local
/// path checked to be a repository, its default ref checked (or picked), then
/// [`add_mapping`].
///
/// # Errors
/// `repository.not_found` for a relative path, a missing one or one that is no repository;
/// `repository.revision_missing` when the proposed default ref does not resolve there;
/// `repository.mapping_exists` when the origin and project map to another path;
/// `config.*` when the file cannot be read, checked or written.
pub fn confirm_proposal(
    config_path: &Path,
    proposal: &MappingProposal,
) -> Result<Confirmed, GatewayError> {
    let loaded = match Config::load(Some(config_path)) {
        Ok(loaded) => Some(loaded),
        // No config file yet: add_mapping creates it.
        Err(ConfigError::NotFound { .. }) => None,
        Err(error) => return Err(error.into()),
    };
    if let Some(m) = loaded
        .as_ref()
        .and_then(|l| l.find_mapping(&proposal.gitlab_origin, &proposal.project_path))
        && same_path(&m.local_path, &proposal.local_path)
    {
        return Ok(Confirmed {
            mapping: m.clone(),
            already: true,
            why: String::new(),
        });
    }
    let proposed = PathBuf::from(&proposal.local_path);
    if !proposed.is_absolute() {
        return Err(GatewayError::new(
            codes::REPOSITORY_NOT_FOUND,
            format!(
                "proposal {}: the local path `{}` is not absolute",
                proposal.id, proposal.local_path
            ),
            "Add the mapping yourself with `review-agent-gateway mappings add --local-path` and \
             the clone's absolute path.",
        ));
    }
    let local_path = checked_repository(&proposed)?;
    let (default_ref, why) = checked_default_ref(
        &local_path,
        proposal.default_ref.as_deref(),
        "the proposal's defaultRef",
    )?;
    let mapping = Mapping {
        gitlab_origin: proposal.gitlab_origin.clone(),
        project_path: proposal.project_path.clone(),
        local_path,
        default_ref,
    };
    add_mapping(config_path, mapping.clone())?;
    Ok(Confirmed {
        mapping,
        already: false,
        why,
    })
}

/// `local_path` made absolute and checked to be a git repository (work tree or bare).
///
/// # Errors
/// `config.local_path_missing` when it does not exist; `repository.not_found` when it is no
/// repository.
pub fn checked_repository(local_path: &Path) -> Result<PathBuf, GatewayError> {
    let local_path = std::fs::canonicalize(local_path).map_err(|_| {
        GatewayError::from(ConfigError::LocalPathMissing {
            local_path: local_path.to_owned(),
            problem: "does not exist",
        })
    })?;
    if let Err(error) = crate::repo::Repository::open(&local_path) {
        return Err(GatewayError::new(
            codes::REPOSITORY_NOT_FOUND,
            error.to_string(),
            "Give the directory of a local clone (git work tree or bare repository) of the \
             project.",
        ));
    }
    Ok(local_path)
}

/// The default ref of a new mapping of `local_path` (issue 12 §5): `given` when it resolves to
/// a commit there, else an error naming it; without one, the repository's own default branch
/// (`Repository::default_branch`). Returns the ref and, when it was picked, a note saying why
/// (`, the checked-out branch`). `what` names where `given` came from, for the message
/// (`--default-ref` gets the command line's remediation).
///
/// # Errors
/// `repository.not_found`; `repository.revision_missing` when `given` does not resolve or the
/// repository has no branch to pick.
pub fn checked_default_ref(
    local_path: &Path,
    given: Option<&str>,
    what: &str,
) -> Result<(String, String), GatewayError> {
    let repo = crate::repo::Repository::open(local_path).map_err(|e| {
        GatewayError::new(
            codes::REPOSITORY_NOT_FOUND,
            e.to_string(),
            "Give the directory of a local clone (git work tree or bare repository) of the \
             project.",
        )
    })?;
    let default = repo.default_branch();
    match given {
        Some(spec) => match repo.resolve(spec) {
            Ok(_) => Ok((spec.to_owned(), String::new())),
            Err(error) if what != "--default-ref" => Err(GatewayError::new(
                codes::REPOSITORY_REVISION_MISSING,
                format!(
                    "{what} `{spec}` does not exist in {}: {error}",
                    local_path.display()
                ),
                format!(
                    "Fetch it (`git -C {} fetch origin {spec}`) and confirm again, or add the \
                     mapping yourself with `review-agent-gateway mappings add`{}.",
                    local_path.display(),
                    default
                        .as_ref()
                        .map(|(name, why)| format!(" (it picks `{name}`, {why})"))
                        .unwrap_or_default()
                ),
            )),
            Err(error) => {
                let hint = match &default {
                    Some((name, why)) => format!(
                        "Give a branch that exists there, e.g. `--default-ref {name}` ({why}), \
                         or leave the option out to use it; or fetch `{spec}` first \
                         (`git -C {} fetch origin {spec}`).",
                        local_path.display()
                    ),
                    None => format!(
                        "Commit or fetch a branch in {} first, then add the mapping.",
                        local_path.display()
                    ),
                };
                Err(GatewayError::new(
                    codes::REPOSITORY_REVISION_MISSING,
                    format!(
                        "{what} `{spec}` does not exist in {}: {error}",
                        local_path.display()
                    ),
                    hint,
                ))
            }
        },
        None => match default {
            Some((name, why)) => Ok((name, format!(", {why}"))),
            None => Err(GatewayError::new(
                codes::REPOSITORY_REVISION_MISSING,
                format!(
                    "{} has no branch to review: no origin/HEAD, no checked-out branch with a \
                     commit, no main or master",
                    local_path.display()
                ),
                "Commit or fetch a branch there first, or give one with --default-ref.",
            )),
        },
    }
}

/// Whether a confirmed mapping's path (canonical) is the proposed one (as the browser wrote
/// it, possibly with `..` or a symlink).
pub fn same_path(confirmed: &Path, proposed: &str) -> bool {
    confirmed == Path::new(proposed)
        || std::fs::canonicalize(proposed).is_ok_and(|p| p == confirmed)
}
