//! The settings page's strings (issue 18 §3): one catalogue per language, `host/i18n/<lang>.json`,
//! shared with the userscript (its `userscript.*` keys, inlined by `extension-bridge/build.mjs`).
//!
//! A catalogue is one flat JSON object, dotted key → text, with `{name}` placeholders and
//! `.one`/`.other` plural pairs. English (`en`) and Simplified Chinese (`zh-CN`) are shipped and
//! embedded in the binary; both hold the same keys with the same placeholders
//! (`host/tests/settings_i18n.rs` checks that, and that every key the templates use exists).
//! A key missing from a catalogue falls back to English, then to the key itself, so a gap
//! shows as a readable key rather than an empty label.
//!
//! The language of a page (DESIGN §15): the `lang` cookie the language menu sets, else the
//! best match of the browser's `Accept-Language` (RFC 9110 §12.5.4: quality values honoured, a
//! `zh` tag of any region or script means `zh-CN`), else English.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::OnceLock;

/// A language the page is shipped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    /// English, the fallback.
    En,
    /// Simplified Chinese.
    ZhCn,
}

impl Lang {
    /// Every shipped language, English first.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::ZhCn];

    /// The BCP 47 tag: `en`, `zh-CN` (also the catalogue's file name and the `lang` attribute).
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhCn => "zh-CN",
        }
    }

    /// The language's own name, as the language menu shows it.
    pub fn native_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::ZhCn => "简体中文",
        }
    }

    /// The shipped language a tag names (case-insensitive; `zh`, `zh-Hans`, `zh-TW` … are
    /// `zh-CN`, the only Chinese catalogue; `en-GB` is `en`); `None` for any other.
    pub fn from_tag(tag: &str) -> Option<Lang> {
        let primary = tag.split(['-', '_']).next().unwrap_or("").trim();
        if primary.eq_ignore_ascii_case("en") {
            Some(Lang::En)
        } else if primary.eq_ignore_ascii_case("zh") {
            Some(Lang::ZhCn)
        } else {
            None
        }
    }

    /// The page's language: `cookie` (the menu's choice) when it names a shipped language, else
    /// the `Accept-Language` header's best shipped match (highest `q`, first on ties; `q=0`
    /// excluded), else English.
    pub fn negotiate(cookie: Option<&str>, accept_language: Option<&str>) -> Lang {
        if let Some(lang) = cookie.and_then(Lang::from_tag) {
            return lang;
        }
        let mut best: Option<(f32, Lang)> = None;
        for item in accept_language.unwrap_or("").split(',').take(32) {
            let mut parts = item.split(';');
            let tag = parts.next().unwrap_or("").trim();
            let q = parts
                .find_map(|p| p.trim().strip_prefix("q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if q <= 0.0 {
                continue;
            }
            if let Some(lang) = Lang::from_tag(tag)
                && best.is_none_or(|(bq, _)| q > bq)
            {
                best = Some((q, lang));
            }
        }
        best.map_or(Lang::En, |(_, lang)| lang)
    }

    fn catalogue(self) -> &'static HashMap<String, String> {
        static EN: OnceLock<HashMap<String, String>> = OnceLock::new();
        static ZH_CN: OnceLock<HashMap<String, String>> = OnceLock::new();
        match self {
            Lang::En => EN.get_or_init(|| parse(include_str!("../../i18n/en.json"))),
            Lang::ZhCn => ZH_CN.get_or_init(|| parse(include_str!("../../i18n/zh-CN.json"))),
        }
    }
}

/// The embedded catalogue of `lang` as a key → text map (for tests and the userscript's build).
pub fn catalogue(lang: Lang) -> &'static HashMap<String, String> {
    lang.catalogue()
}

/// A catalogue that does not parse is a build defect the tests catch; at run time it is empty,
/// so keys show instead of a crash.
fn parse(text: &str) -> HashMap<String, String> {
    serde_json::from_str(text).unwrap_or_default()
}

/// The strings of one page view, in its language: what templates call as `t`.
#[derive(Debug, Clone, Copy)]
pub struct Tr {
    lang: Lang,
}

impl Tr {
    /// The strings of `lang`.
    pub fn new(lang: Lang) -> Tr {
        Tr { lang }
    }

    /// The language.
    pub fn lang(&self) -> Lang {
        self.lang
    }

    /// The text of `key`: this language's, else English, else the key itself.
    pub fn get<'a>(&self, key: &'a str) -> &'a str {
        self.lang
            .catalogue()
            .get(key)
            .or_else(|| Lang::En.catalogue().get(key))
            .map_or(key, String::as_str)
    }

    /// The text of `key` with `{name}` replaced by `value` (placeholders of other names are
    /// left as they are).
    pub fn with(&self, key: &str, name: &str, value: impl Display) -> String {
        self.get(key)
            .replace(&format!("{{{name}}}"), &value.to_string())
    }

    /// The text of `key` with two placeholders replaced.
    pub fn with2(
        &self,
        key: &str,
        (n1, v1): (&str, &dyn Display),
        (n2, v2): (&str, &dyn Display),
    ) -> String {
        self.get(key)
            .replace(&format!("{{{n1}}}"), &v1.to_string())
            .replace(&format!("{{{n2}}}"), &v2.to_string())
    }

    /// `key.one` for a count of 1, else `key.other`, with `{count}` replaced.
    pub fn count(&self, key: &str, count: impl Into<u64>) -> String {
        let count = count.into();
        let form = if count == 1 { "one" } else { "other" };
        self.with(&format!("{key}.{form}"), "count", count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_cookie_then_quality() {
        assert_eq!(Lang::negotiate(None, None), Lang::En);
        assert_eq!(Lang::negotiate(None, Some("zh-TW,zh;q=0.9")), Lang::ZhCn);
        assert_eq!(
            Lang::negotiate(None, Some("fr, zh;q=0.5, en;q=0.8")),
            Lang::En
        );
        assert_eq!(
            Lang::negotiate(None, Some("fr, zh;q=0.9, en;q=0.8")),
            Lang::ZhCn
        );
        assert_eq!(Lang::negotiate(None, Some("zh;q=0, en;q=0.1")), Lang::En);
        assert_eq!(Lang::negotiate(Some("zh-CN"), Some("en")), Lang::ZhCn);
        assert_eq!(Lang::negotiate(Some("klingon"), Some("zh")), Lang::ZhCn);
        assert_eq!(Lang::negotiate(None, Some(";;;,,q=x")), Lang::En);
    }

    #[test]
    fn missing_keys_fall_back_to_the_key() {
        let t = Tr::new(Lang::ZhCn);
        assert_eq!(t.get("settings.no.such.key"), "settings.no.such.key");
    }
}
