//! Registers the `review-agent-gateway` native messaging host with browsers, removes it, and
//! checks it (the `install`, `uninstall` and `doctor` subcommands; DESIGN §2, §3, §11).
//!
//! The flow: an [`Environment`] (OS, home, XDG dir, installed Flatpaks, a root for system paths)
//! and the browsers, [`Scope`] and [`ExtensionIds`] give, through [`locations`] and [`plan`],
//! every place a browser reads host manifests and the manifest (from the templates in
//! `manifests/`) and launcher to write there. [`apply::install`] / [`apply::uninstall`] change
//! the machine; [`doctor::inspect`] validates what is installed the way the browser will.
//! Everything but `apply`, `registry` and `doctor` is a pure function of its inputs, so the
//! Linux, macOS and Windows plans are all tested on Linux.
//!
//! **Invariant:** a manifest carries `allowed_origins` (Chrome family) or `allowed_extensions`
//! (Firefox family), never both; manifests are built with serde_json, never by pasting paths
//! into text; files are UTF-8 without a BOM.

pub mod apply;
pub mod browser;
pub mod doctor;
pub mod error;
pub mod ids;
pub mod launcher;
pub mod manifest;
pub mod plan;
pub mod registry;

pub use browser::{Browser, Family, Os, Scope};
pub use error::InstallerError;
pub use ids::ExtensionIds;
pub use manifest::Problem;
pub use plan::{Environment, InstallRequest, Location, Target, locations, plan};

/// The native messaging host name: what the extension passes to `connectNative` (DESIGN §1),
/// the manifest's `name`, its file name without `.json`, and the Windows registry key name.
/// Follows Chrome's rules (lowercase alphanumerics, `_` and `.`; no leading, trailing or
/// doubled dot), which also satisfy Firefox's.
pub const HOST_NAME: &str = "com.review_agent.gateway";

/// The manifest file name: `com.review_agent.gateway.json`.
pub fn manifest_file_name() -> String {
    format!("{HOST_NAME}.json")
}

/// The companion extension's Chrome id, allowed when no `--extension-id` gives a Chrome one.
/// Fixed by the `key` in `extension-bridge/extension/manifest.json`: the first 32 hex digits of
/// SHA-256 of that DER public key, mapped 0-f → a-p (checked by `extension-bridge/tests/e2e.mjs`).
pub const COMPANION_CHROME_EXTENSION_ID: Option<&str> = Some("dfdnfmehigamlgmiglpnpoakceohheag");

/// PLACEHOLDER — the companion extension's Firefox add-on id
/// (`browser_specific_settings.gecko.id` in `extension-bridge/`'s manifest), allowed when no
/// `--extension-id` gives a Firefox one. Change it here if the extension picks another id.
pub const COMPANION_FIREFOX_EXTENSION_ID: Option<&str> = Some("companion@review-agent-gateway");

/// The ids to allow: those given (validated by [`ExtensionIds::parse`]), plus, for a family
/// none of them belongs to, the companion extension's default id for it
/// ([`COMPANION_CHROME_EXTENSION_ID`], [`COMPANION_FIREFOX_EXTENSION_ID`]) when set.
///
/// # Errors
/// [`InstallerError::InvalidExtensionId`] for a given id that is neither kind.
pub fn ids_with_defaults<S: AsRef<str>>(given: &[S]) -> Result<ExtensionIds, InstallerError> {
    let mut ids = ExtensionIds::parse(given)?;
    if ids.chrome().is_empty()
        && let Some(id) = COMPANION_CHROME_EXTENSION_ID
    {
        ids.add(id)?;
    }
    if ids.firefox().is_empty()
        && let Some(id) = COMPANION_FIREFOX_EXTENSION_ID
    {
        ids.add(id)?;
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    #[test]
    fn defaults_are_valid_ids() {
        let ids = super::ids_with_defaults::<&str>(&[]).expect("defaults are valid");
        assert_eq!(
            ids.chrome().len(),
            usize::from(super::COMPANION_CHROME_EXTENSION_ID.is_some())
        );
        assert_eq!(
            ids.firefox().len(),
            usize::from(super::COMPANION_FIREFOX_EXTENSION_ID.is_some())
        );
    }
}
