//! The settings page's catalogues (issue 18 §3, `host/i18n/<lang>.json`): every `settings.*`
//! key the templates and handlers name exists in English and Chinese, every `settings.*` key
//! of the catalogues is used, both catalogues hold the same keys with the same placeholders,
//! and no text holds markup. (The `userscript.*` keys are checked by
//! `extension-bridge/tests/client-unit.mjs`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn catalogue(lang: &str) -> BTreeMap<String, String> {
    let path = manifest_dir().join("i18n").join(format!("{lang}.json"));
    let text = std::fs::read_to_string(&path).expect("catalogue");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file under `dir` (recursively) whose name ends with one of `exts`.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, exts, out);
        } else if exts.iter().any(|e| path.to_string_lossy().ends_with(e)) {
            out.push(path);
        }
    }
}

/// The `"settings.…"` string literals of `text` that name catalogue keys (not file names such
/// as `"settings.css"`).
fn keys_in(text: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for (i, _) in text.match_indices("\"settings.") {
        let rest = &text[i + 1..];
        let end = rest.find('"').unwrap_or(rest.len());
        let key = &rest[..end];
        if key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_' || c.is_ascii_digit())
            && !key.ends_with(".css")
            && !key.ends_with(".js")
            && !key.ends_with('.')
        {
            keys.insert(key.to_owned());
        }
    }
    keys
}

fn placeholders(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) => {
                out.insert(after[..end].to_owned());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}

#[test]
fn every_settings_key_exists_in_both_catalogues_and_is_used() {
    let en = catalogue("en");
    let zh = catalogue("zh-CN");
    let mut sources = Vec::new();
    files(
        &manifest_dir().join("templates/settings"),
        &[".html"],
        &mut sources,
    );
    files(&manifest_dir().join("src/settings"), &[".rs"], &mut sources);
    sources.push(manifest_dir().join("src/settings.rs"));
    let mut used = BTreeSet::new();
    for file in &sources {
        used.extend(keys_in(&std::fs::read_to_string(file).expect("source")));
    }
    // Keys that only exist for the fallback test of `Tr::get`.
    used.remove("settings.no.such.key");
    // `Tr::count(key, n)` names `key.one` / `key.other`.
    let plural: BTreeSet<String> = used
        .iter()
        .flat_map(|k| [format!("{k}.one"), format!("{k}.other")])
        .filter(|k| en.contains_key(k))
        .collect();
    let missing: Vec<_> = used
        .iter()
        .filter(|k| !en.contains_key(*k) && !en.contains_key(&format!("{k}.one")))
        .collect();
    assert!(missing.is_empty(), "used but not in en.json: {missing:?}");
    let unused: Vec<_> = en
        .keys()
        .filter(|k| k.starts_with("settings."))
        .filter(|k| !used.contains(*k) && !plural.contains(*k))
        .collect();
    assert!(unused.is_empty(), "in en.json but used nowhere: {unused:?}");
    let en_keys: BTreeSet<_> = en.keys().collect();
    let zh_keys: BTreeSet<_> = zh.keys().collect();
    assert_eq!(
        en_keys.symmetric_difference(&zh_keys).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "en.json and zh-CN.json differ in keys"
    );
    for (key, text) in &en {
        assert_eq!(
            placeholders(text),
            placeholders(&zh[key]),
            "placeholders of {key} differ"
        );
        for t in [text, &zh[key]] {
            assert!(!t.contains('<') && !t.trim().is_empty(), "{key}: `{t}`");
        }
    }
}
