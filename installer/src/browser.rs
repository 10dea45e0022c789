//! Browsers, browser families, install scopes and operating systems: the plain data every
//! location and manifest decision is a function of (DESIGN §11).

use std::fmt;
use std::str::FromStr;

/// A browser the host can be registered with.
///
/// Parsed from (and displayed as) its lowercase CLI name: `chrome`, `chromium`, `edge`, `brave`,
/// `vivaldi`, `firefox`, `librewolf`. The selector `all` is handled by [`Browser::parse_selection`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Browser {
    /// Google Chrome.
    Chrome,
    /// Chromium (distribution packages, Flatpak `org.chromium.Chromium`).
    Chromium,
    /// Microsoft Edge.
    Edge,
    /// Brave.
    Brave,
    /// Vivaldi.
    Vivaldi,
    /// Mozilla Firefox.
    Firefox,
    /// LibreWolf (a Firefox derivative with its own profile and host directories).
    Librewolf,
}

/// Which manifest dialect a browser reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Chrome, Chromium, Edge, Brave, Vivaldi: `allowed_origins` with `chrome-extension://ID/`
    /// entries; the host gets the caller origin as argv\[1\].
    Chromium,
    /// Firefox, LibreWolf: `allowed_extensions` with add-on ids; the host gets the manifest path
    /// as argv\[1\] and the add-on id as argv\[2\].
    Firefox,
}

impl Family {
    /// `"Chrome-family"` or `"Firefox-family"`, for messages.
    pub fn label(self) -> &'static str {
        match self {
            Family::Chromium => "Chrome-family",
            Family::Firefox => "Firefox-family",
        }
    }
}

/// Whose browsers see the registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// The current user only (files under the home directory; `HKEY_CURRENT_USER`).
    User,
    /// Every user of the machine (`/etc`, `/usr/lib`, `/Library`; `HKEY_LOCAL_MACHINE`):
    /// needs root or an administrator.
    System,
}

impl Scope {
    /// `"user"` or `"system"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::System => "system",
        }
    }
}

/// The operating system whose conventions a plan follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Os {
    /// Linux (and other freedesktop systems): manifest files, XDG config dir, Flatpak.
    Linux,
    /// macOS: manifest files under `Library/Application Support` or `/Library`.
    MacOs,
    /// Windows: manifest files anywhere, found through registry keys.
    Windows,
}

impl Os {
    /// The OS this binary was compiled for (anything not macOS or Windows counts as Linux).
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::MacOs
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Linux
        }
    }
}

impl Browser {
    /// Every browser, in a fixed order (the order `all` expands to and plans list targets in).
    pub const ALL: [Browser; 7] = [
        Browser::Chrome,
        Browser::Chromium,
        Browser::Edge,
        Browser::Brave,
        Browser::Vivaldi,
        Browser::Firefox,
        Browser::Librewolf,
    ];

    /// The lowercase CLI name (`chrome`, ..., `librewolf`).
    pub fn name(self) -> &'static str {
        match self {
            Browser::Chrome => "chrome",
            Browser::Chromium => "chromium",
            Browser::Edge => "edge",
            Browser::Brave => "brave",
            Browser::Vivaldi => "vivaldi",
            Browser::Firefox => "firefox",
            Browser::Librewolf => "librewolf",
        }
    }

    /// The manifest dialect it reads.
    pub fn family(self) -> Family {
        match self {
            Browser::Firefox | Browser::Librewolf => Family::Firefox,
            _ => Family::Chromium,
        }
    }

    /// The Flathub application id of its Flatpak build, if there is one we register with.
    pub fn flatpak_app_id(self) -> &'static str {
        match self {
            Browser::Chrome => "com.google.Chrome",
            Browser::Chromium => "org.chromium.Chromium",
            Browser::Edge => "com.microsoft.Edge",
            Browser::Brave => "com.brave.Browser",
            Browser::Vivaldi => "com.vivaldi.Vivaldi",
            Browser::Firefox => "org.mozilla.firefox",
            Browser::Librewolf => "io.gitlab.librewolf-community",
        }
    }

    /// Parse a comma-separated list of names, where `all` stands for [`Browser::ALL`].
    /// Duplicates are dropped; the result keeps the [`Browser::ALL`] order.
    ///
    /// # Errors
    /// [`UnknownBrowser`] for a name that is none of the above (or an empty list).
    pub fn parse_selection(text: &str) -> Result<Vec<Browser>, UnknownBrowser> {
        let mut chosen = Vec::new();
        for part in text.split(',').map(str::trim) {
            if part.eq_ignore_ascii_case("all") {
                chosen.extend(Browser::ALL);
            } else {
                chosen.push(part.parse()?);
            }
        }
        chosen.sort();
        chosen.dedup();
        Ok(chosen)
    }
}

impl fmt::Display for Browser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A browser name [`Browser::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown browser {0:?}: expected chrome, chromium, edge, brave, vivaldi, firefox, librewolf or all"
)]
pub struct UnknownBrowser(pub String);

impl FromStr for Browser {
    type Err = UnknownBrowser;

    /// Case-insensitive CLI name; `google-chrome` and `msedge` are accepted as aliases.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "chrome" | "google-chrome" => Browser::Chrome,
            "chromium" => Browser::Chromium,
            "edge" | "msedge" | "microsoft-edge" => Browser::Edge,
            "brave" => Browser::Brave,
            "vivaldi" => Browser::Vivaldi,
            "firefox" => Browser::Firefox,
            "librewolf" => Browser::Librewolf,
            _ => return Err(UnknownBrowser(s.to_owned())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_expands_all_and_dedups() {
        assert_eq!(
            Browser::parse_selection("all").expect("valid"),
            Browser::ALL.to_vec()
        );
        assert_eq!(
            Browser::parse_selection("firefox,chrome,Firefox").expect("valid"),
            vec![Browser::Chrome, Browser::Firefox]
        );
        assert!(Browser::parse_selection("safari").is_err());
        assert!(Browser::parse_selection("").is_err());
        for b in Browser::ALL {
            assert_eq!(b.name().parse::<Browser>().expect("valid"), b);
        }
    }
}
