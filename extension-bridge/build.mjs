#!/usr/bin/env node
// Builds the companion extension for each browser family from the one source in extension/:
//   node build.mjs [--dev-origin ORIGIN]...
// emits dist/chrome/ (service worker background, the fixed `key` so the id is stable) and
// dist/firefox/ (event-page background scripts, `browser_specific_settings.gecko.id`, no `key`).
// It also writes dist/review-locally.user.js: userscript/review-locally.user.js with the client
// library (client/index.js, its `export`s dropped) inlined at its `/* @inline client/index.js */`
// marker, since userscript managers cannot import ES modules, and the `userscript.*` strings of
// every host/i18n/<lang>.json (the catalogues shared with the gateway's settings page) at its
// `/* @inline host/i18n */ {}` marker as `{ "en": {...}, "zh-CN": {...} }`, so it needs no
// fetch; its `@name` and `@description` get a `@name:<lang>` / `@description:<lang>` line per
// other language (`userscript.meta.name`, `userscript.meta.description`), which Tampermonkey and
// Violentmonkey show in the browser's language.
// `--dev-origin http://127.0.0.1` adds an origin to the content script's matches and the host
// permissions (tests use it for a page on loopback standing in for a GitLab origin);
// `--dev-host-permission http://localhost` adds a host permission only, so the options page's
// "Add" gets it without the browser's prompt (which a headless browser cannot answer) and the
// content script runs there only once the options page registered it.
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(fileURLToPath(import.meta.url));
const source = join(root, "extension");
/** The string catalogues, one `<lang>.json` per language. */
export const I18N_DIR = join(root, "../host/i18n");
/** The catalogue keys of the userscript's metadata lines, by metadata key. */
export const META_KEYS = { name: "userscript.meta.name", description: "userscript.meta.description" };

/** Parses `--dev-origin ORIGIN`, `--dev-host-permission ORIGIN` (both repeatable) and
 * `--out DIR`; exits 2 on anything else. */
function parseArgs(argv) {
  const devOrigins = [];
  const devHostPermissions = [];
  let out = join(root, "dist");
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--dev-origin" && argv[i + 1]) {
      const origin = new URL(argv[++i]).origin;
      devOrigins.push(origin);
    } else if (arg === "--dev-host-permission" && argv[i + 1]) {
      devHostPermissions.push(new URL(argv[++i]).origin);
    } else if (arg === "--out" && argv[i + 1]) {
      out = argv[++i];
    } else {
      console.error(`build.mjs: unknown argument ${arg}\nusage: node build.mjs [--dev-origin ORIGIN]... [--dev-host-permission ORIGIN]... [--out DIR]`);
      process.exit(2);
    }
  }
  return { devOrigins, devHostPermissions, out };
}

/** The manifest of one family ("chrome" or "firefox") from the shared source manifest. */
export function manifestFor(family, base, devOrigins = [], devHostPermissions = []) {
  const m = structuredClone(base);
  const pattern = (o) => `${o.replace(/:\d+$/, "")}/*`;
  const patterns = devOrigins.map(pattern);
  m.host_permissions = [...m.host_permissions, ...patterns, ...devHostPermissions.map(pattern)];
  m.content_scripts = m.content_scripts.map((cs) => ({ ...cs, matches: [...cs.matches, ...patterns] }));
  if (family === "chrome") {
    m.background = { service_worker: base.background.service_worker };
    delete m.browser_specific_settings;
  } else if (family === "firefox") {
    m.background = { scripts: base.background.scripts };
    delete m.key;
  } else {
    throw new Error(`unknown family ${family}`);
  }
  return m;
}

/** The `userscript.*` entries of each catalogue in `dir`, keys sorted: `{ en: {...}, "zh-CN": {...} }`,
 * English first. */
export function userscriptCatalogues(dir = I18N_DIR) {
  const langs = readdirSync(dir).filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -".json".length))
    .sort((a, b) => (a === "en" ? -1 : b === "en" ? 1 : a.localeCompare(b)));
  if (!langs.includes("en")) throw new Error(`${dir} has no en.json`);
  return Object.fromEntries(langs.map((lang) => {
    const entries = JSON.parse(readFileSync(join(dir, `${lang}.json`), "utf8"));
    return [lang, Object.fromEntries(Object.keys(entries).filter((k) => k.startsWith("userscript.")).sort().map((k) => [k, entries[k]]))];
  }));
}

/** The installable userscript: the source with the client library and the catalogues inlined at
 * their markers, and its name and description in each language. */
export function buildUserscript() {
  const marker = "/* @inline client/index.js */";
  const i18nMarker = "/* @inline host/i18n */ {}";
  let source = readFileSync(join(root, "userscript/review-locally.user.js"), "utf8");
  for (const m of [marker, i18nMarker]) if (!source.includes(m)) throw new Error(`userscript/review-locally.user.js has no ${m} marker`);
  const client = readFileSync(join(root, "client/index.js"), "utf8").replace(/^export /gm, "");
  if (/^\s*(import|export)\b/m.test(client)) throw new Error("client/index.js has an import/export the inliner cannot drop");
  const catalogues = userscriptCatalogues();
  for (const [field, key] of Object.entries(META_KEYS)) {
    const line = new RegExp(`^// @${field}\\s.*$`, "m");
    if (!line.test(source)) throw new Error(`userscript/review-locally.user.js has no @${field} line`);
    const localized = Object.entries(catalogues).filter(([lang, entries]) => lang !== "en" && entries[key])
      .map(([lang, entries]) => `\n// ${`@${field}:${lang}`.padEnd(13)} ${entries[key]}`).join("");
    source = source.replace(line, (l) => l + localized);
  }
  return source
    .replace(marker, () => `// ---- client/index.js (inlined by build.mjs) ----\n${client}// ---- end of client/index.js ----`)
    .replace(i18nMarker, () => `/* the userscript.* keys of host/i18n/<lang>.json, inlined by build.mjs */ ${JSON.stringify(catalogues, null, 2)}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { devOrigins, devHostPermissions, out } = parseArgs(process.argv.slice(2));
  const base = JSON.parse(readFileSync(join(source, "manifest.json"), "utf8"));
  for (const family of ["chrome", "firefox"]) {
    const dir = join(out, family);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    for (const file of readdirSync(source)) {
      if (file !== "manifest.json") cpSync(join(source, file), join(dir, file), { recursive: true });
    }
    writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifestFor(family, base, devOrigins, devHostPermissions), null, 2) + "\n");
    console.log(`built ${dir}`);
  }
  writeFileSync(join(out, "review-locally.user.js"), buildUserscript());
  console.log(`built ${join(out, "review-locally.user.js")}`);
}
