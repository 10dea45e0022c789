#!/usr/bin/env node
// Builds the companion extension for each browser family from the one source in extension/:
//   node build.mjs [--dev-origin ORIGIN]...
// emits dist/chrome/ (service worker background, the fixed `key` so the id is stable) and
// dist/firefox/ (event-page background scripts, `browser_specific_settings.gecko.id`, no `key`).
// It also writes dist/review-locally.user.js: userscript/review-locally.user.js with the client
// library (client/index.js, its `export`s dropped) inlined at its `/* @inline client/index.js */`
// marker, since userscript managers cannot import ES modules.
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

/** The installable userscript: the source with the client library inlined at its marker. */
export function buildUserscript() {
  const marker = "/* @inline client/index.js */";
  const source = readFileSync(join(root, "userscript/review-locally.user.js"), "utf8");
  if (!source.includes(marker)) throw new Error(`userscript/review-locally.user.js has no ${marker} marker`);
  const client = readFileSync(join(root, "client/index.js"), "utf8").replace(/^export /gm, "");
  if (/^\s*(import|export)\b/m.test(client)) throw new Error("client/index.js has an import/export the inliner cannot drop");
  return source.replace(marker, `// ---- client/index.js (inlined by build.mjs) ----\n${client}// ---- end of client/index.js ----`);
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
