//! The names and ids a browser checks: the host name, Chrome extension ids/origins and Firefox
//! add-on ids, and the set of ids a manifest allows.

use std::sync::LazyLock;

use regex::Regex;

use crate::browser::Family;
use crate::error::InstallerError;

/// Whether `name` is a valid native messaging host name.
///
/// Chrome: "only lowercase alphanumeric characters, underscores and dots; can't start or end with
/// a dot, and a dot can't be followed by another dot" (developer.chrome.com, Native messaging).
/// Firefox's rule (`^\w+(\.\w+)*$`, MDN Native manifests) also admits uppercase; the Chrome rule
/// is the stricter one and the one we enforce for both.
pub fn is_valid_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

/// Whether `id` is a Chrome extension id: exactly 32 characters `a`–`p` (the first 128 bits of
/// the SHA-256 of the extension's public key, one hex digit per letter, 0 → a ... f → p).
pub fn is_chrome_extension_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

/// The `allowed_origins` entry for a Chrome extension id: `chrome-extension://ID/` (the trailing
/// slash is required; Chrome rejects wildcards).
pub fn chrome_origin(id: &str) -> String {
    format!("chrome-extension://{id}/")
}

/// Whether `origin` is a valid `allowed_origins` entry: `chrome-extension://` + a Chrome id + `/`.
pub fn is_chrome_origin(origin: &str) -> bool {
    origin
        .strip_prefix("chrome-extension://")
        .and_then(|rest| rest.strip_suffix('/'))
        .is_some_and(is_chrome_extension_id)
}

static FIREFOX_ID: LazyLock<Regex> = LazyLock::new(|| {
    // Firefox's add-on id rule (toolkit/mozapps/extensions, `gIDTest`): a GUID in braces, or an
    // email-like `local@domain` of letters, digits, `-`, `.`, `_`.
    Regex::new(
        r"(?i)^(\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}|[a-z0-9\-._]*@[a-z0-9\-._]+)$",
    )
    .expect("the add-on id pattern compiles")
});

/// Whether `id` is a Firefox add-on id (`name@domain` or `{uuid}`), as `allowed_extensions`
/// entries must be (MDN, Native manifests; Firefox's add-on id rule).
pub fn is_firefox_extension_id(id: &str) -> bool {
    id.len() <= 255 && FIREFOX_ID.is_match(id)
}

/// The extension ids a manifest allows, split by family. Build it with [`ExtensionIds::parse`]
/// or [`ExtensionIds::add`]; the lists keep the order given and hold no duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtensionIds {
    // Invariant: every entry passed `is_chrome_extension_id` / `is_firefox_extension_id`.
    chrome: Vec<String>,
    firefox: Vec<String>,
}

impl ExtensionIds {
    /// Classify and validate every id: a 32-letter `a`–`p` id (or `chrome-extension://ID/`) is a
    /// Chrome id, `name@domain` or `{uuid}` a Firefox one.
    ///
    /// # Errors
    /// [`InstallerError::InvalidExtensionId`] for the first id that is neither.
    pub fn parse<S: AsRef<str>>(ids: &[S]) -> Result<Self, InstallerError> {
        let mut out = ExtensionIds::default();
        for id in ids {
            out.add(id.as_ref())?;
        }
        Ok(out)
    }

    /// Add one id (see [`ExtensionIds::parse`]).
    ///
    /// # Errors
    /// [`InstallerError::InvalidExtensionId`] when it is neither kind.
    pub fn add(&mut self, id: &str) -> Result<(), InstallerError> {
        let trimmed = id.trim();
        let bare = trimmed
            .strip_prefix("chrome-extension://")
            .map(|rest| rest.trim_end_matches('/'))
            .unwrap_or(trimmed);
        let (list, value) = if is_chrome_extension_id(bare) {
            (&mut self.chrome, bare)
        } else if is_firefox_extension_id(trimmed) {
            (&mut self.firefox, trimmed)
        } else {
            let reason = if trimmed.starts_with("chrome-extension://") || bare.len() == 32 {
                "a Chrome id is exactly 32 lowercase letters a-p".to_owned()
            } else {
                "expected 32 letters a-p (Chrome) or name@domain / {uuid} (Firefox)".to_owned()
            };
            return Err(InstallerError::InvalidExtensionId {
                id: id.to_owned(),
                reason,
            });
        };
        if !list.iter().any(|known| known == value) {
            list.push(value.to_owned());
        }
        Ok(())
    }

    /// The Chrome extension ids (bare, 32 letters).
    pub fn chrome(&self) -> &[String] {
        &self.chrome
    }

    /// The Firefox add-on ids.
    pub fn firefox(&self) -> &[String] {
        &self.firefox
    }

    /// The ids of one family (bare Chrome ids for [`Family::Chromium`]).
    pub fn of(&self, family: Family) -> &[String] {
        match family {
            Family::Chromium => &self.chrome,
            Family::Firefox => &self.firefox,
        }
    }

    /// The manifest allowlist for a family: `chrome-extension://ID/` origins for Chromium,
    /// add-on ids for Firefox.
    pub fn allowlist(&self, family: Family) -> Vec<String> {
        match family {
            Family::Chromium => self.chrome.iter().map(|id| chrome_origin(id)).collect(),
            Family::Firefox => self.firefox.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_follow_chrome_rules() {
        for good in ["com.review_agent.gateway", "a", "a1.b_2", "x.y.z"] {
            assert!(is_valid_host_name(good), "{good}");
        }
        for bad in ["", ".a", "a.", "a..b", "A.b", "a-b", "a b", "é"] {
            assert!(!is_valid_host_name(bad), "{bad}");
        }
        assert!(is_valid_host_name(crate::HOST_NAME));
    }

    #[test]
    fn chrome_ids_and_origins() {
        let id = "knldjmfmopnpolahpmmgbagdohdnhkik";
        assert!(is_chrome_extension_id(id));
        assert!(is_chrome_origin(&chrome_origin(id)));
        assert!(!is_chrome_origin(
            "chrome-extension://knldjmfmopnpolahpmmgbagdohdnhkik"
        ));
        assert!(!is_chrome_origin("chrome-extension://*/"));
        assert!(!is_chrome_extension_id("knldjmfmopnpolahpmmgbagdohdnhkiz"));
        assert!(!is_chrome_extension_id("KNLDJMFMOPNPOLAHPMMGBAGDOHDNHKIK"));
        assert!(!is_chrome_extension_id("knldjmfmopnpolahpmmgbagdohdnhki"));
    }

    #[test]
    fn firefox_ids() {
        for good in [
            "companion@review-agent-gateway",
            "@x",
            "{b9db16a4-6edc-47ec-a1f4-b86292ed211d}",
        ] {
            assert!(is_firefox_extension_id(good), "{good}");
        }
        for bad in ["no-at-sign", "a@", "{not-a-uuid}", "a b@c", "a@b/c"] {
            assert!(!is_firefox_extension_id(bad), "{bad}");
        }
    }

    #[test]
    fn parse_classifies_and_dedups() {
        let ids = ExtensionIds::parse(&[
            "chrome-extension://knldjmfmopnpolahpmmgbagdohdnhkik/",
            "knldjmfmopnpolahpmmgbagdohdnhkik",
            "a@b",
        ])
        .expect("valid ids");
        assert_eq!(ids.chrome(), ["knldjmfmopnpolahpmmgbagdohdnhkik"]);
        assert_eq!(ids.firefox(), ["a@b"]);
        assert_eq!(
            ids.allowlist(Family::Chromium),
            ["chrome-extension://knldjmfmopnpolahpmmgbagdohdnhkik/"]
        );
        assert!(ExtensionIds::parse(&["zzzz"]).is_err());
    }
}
