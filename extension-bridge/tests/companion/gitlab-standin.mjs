// A stand-in GitLab instance for the companion test of issue 17 (contract:
// /work/notes/issue17-contract.md, "Stand-in GitLab"): a real HTTP server on 127.0.0.1 serving
//
// - merge-request pages whose diff is rendered from a real `git diff` of the fixture repository
//   in one of GitLab's three diff markups (`?markup=rapid|vue|classic`, Rapid Diffs also in its
//   parallel view with `&view=parallel`; shapes and their GitLab sources in
//   /work/notes/rapid-diffs.md), light or dark (`?theme=dark` → `<html class="gl-dark">`),
//   at `/group/project/-/merge_requests/:iid[/diffs]` and under the path prefix `/gitlab`;
// - the REST endpoints the userscript calls (merge request, diffs, draft notes, discussions),
//   same-origin with the page's session cookie, enforcing GitLab's documented position and CSRF
//   rules, and recording every POST so the test can assert the exact position;
// - `/__test/gm`: the storage of the GM stand-in (the userscript manager's storage, kept here,
//   outside the page's own storage, so it survives reloads and the page cannot read it through
//   localStorage);
// - `/blank` (a page of the origin without a merge request).
//
// `startStandin()` returns the server's handle (see its doc comment). Nothing here is a mock of
// the gateway: the test's gateway is the real daemon.
import { createHash, randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import { createServer } from "node:http";

const PROJECT_ID = 42;
const PROJECT_PATH = "group/project";
const PREFIXES = ["", "/gitlab"];

// === the diff ===

/**
 * Parses `git diff` output (no colour, `-U3`) into GitLab's per-file shape: `{ old_path,
 * new_path, a_mode, b_mode, new_file, renamed_file, deleted_file, diff, hunks }`, where `diff`
 * is the file's unified diff text from its first `@@` on (GitLab's `diffs` API leaves out the
 * `diff --git`/`---`/`+++` header) and `hunks` = `[{ header, rows: [{ type: "context" | "added" |
 * "removed" | "meta", old, new, text }], oldStart, oldCount, newStart, newCount }]` (`old`/`new`
 * null on the side a line lacks; the counts from the `@@` header).
 */
export function parseGitDiff(text) {
  const files = [];
  let file = null;
  let hunk = null;
  let oldLine = 0;
  let newLine = 0;
  for (const line of text.split("\n")) {
    const start = line.match(/^diff --git a\/(.+) b\/(.+)$/);
    if (start) {
      file = { old_path: start[1], new_path: start[2], a_mode: "100644", b_mode: "100644", new_file: false,
        renamed_file: false, deleted_file: false, diff: "", hunks: [] };
      files.push(file);
      hunk = null;
      continue;
    }
    if (!file) continue;
    if (!hunk) {
      if (line.startsWith("new file mode ")) { file.new_file = true; file.a_mode = "0"; file.b_mode = line.slice(14); }
      else if (line.startsWith("deleted file mode ")) { file.deleted_file = true; file.b_mode = "0"; file.a_mode = line.slice(18); }
      else if (line.startsWith("rename from ")) { file.renamed_file = true; file.old_path = line.slice(12); }
      else if (line.startsWith("rename to ")) file.new_path = line.slice(10);
      else if (line.startsWith("index ")) { const m = line.match(/ (\d{6})$/); if (m) { file.a_mode = m[1]; file.b_mode = m[1]; } }
    }
    const header = line.match(/^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/);
    if (header) {
      hunk = { header: line, oldStart: Number(header[1]), oldCount: Number(header[2] ?? 1),
        newStart: Number(header[3]), newCount: Number(header[4] ?? 1), rows: [] };
      file.hunks.push(hunk);
      file.diff += `${line}\n`;
      oldLine = hunk.oldStart;
      newLine = hunk.newStart;
      continue;
    }
    if (!hunk || line === "") continue;
    file.diff += `${line}\n`;
    const body = line.slice(1);
    if (line[0] === "+") hunk.rows.push({ type: "added", old: null, new: newLine++, text: body });
    else if (line[0] === "-") hunk.rows.push({ type: "removed", old: oldLine++, new: null, text: body });
    else if (line[0] === " ") hunk.rows.push({ type: "context", old: oldLine++, new: newLine++, text: body });
    else if (line[0] === "\\") hunk.rows.push({ type: "meta", old: null, new: null, text: line });
  }
  return files;
}

/** `git diff base..head` of `repo`, parsed by [`parseGitDiff`]. Throws with git's stderr. */
export function gitDiff(repo, base, head) {
  const r = spawnSync("git", ["-c", "core.quotepath=false", "diff", "--no-color", "--no-ext-diff", "-U3", "-M", base, head],
    { cwd: repo, encoding: "utf8", maxBuffer: 256 << 20 }); // (a large merge request: bench/companion.mjs)
  if (r.status !== 0) throw new Error(`git diff ${base} ${head}: ${r.stderr}`);
  return parseGitDiff(r.stdout);
}

/**
 * Where a draft note's `position` lands in `file` (one of [`parseGitDiff`]'s files), by
 * GitLab's documented rules (doc/api/discussions.md, "Create a new thread in the merge request
 * diff"): "To create a thread on an added line … use `position[new_line]` and don't include
 * `position[old_line]`"; "on a removed line … use `position[old_line]` and don't include
 * `position[new_line]`"; "on an unchanged line, include both `position[new_line]` and
 * `position[old_line]` for the line. These positions might not be the same if earlier changes
 * in the file changed the line number." An unchanged line outside the hunks (an expanded line)
 * is accepted when its old and new numbers are the same line (the offset of the hunks above).
 * @returns {string | null} null when valid, else why not
 */
export function positionProblem(file, oldLine, newLine) {
  const rows = file.hunks.flatMap((h) => h.rows);
  if (newLine != null && oldLine == null) {
    return rows.some((r) => r.type === "added" && r.new === newLine) ? null : `new_line ${newLine} alone is not an added line`;
  }
  if (oldLine != null && newLine == null) {
    return rows.some((r) => r.type === "removed" && r.old === oldLine) ? null : `old_line ${oldLine} alone is not a removed line`;
  }
  if (oldLine == null && newLine == null) return "neither old_line nor new_line";
  const row = rows.find((r) => r.new === newLine || r.old === oldLine);
  if (row) {
    return row.type === "context" && row.old === oldLine && row.new === newLine ? null
      : `old_line ${oldLine} and new_line ${newLine} are not one unchanged line (the diff has ${row.type} old ${row.old} new ${row.new})`;
  }
  // Outside every hunk: unchanged; the new number is the old one shifted by the hunks above.
  let shift = 0;
  // (a pure insertion `-N,0` comes after old line N)
  for (const h of file.hunks) if (h.oldStart + Math.max(h.oldCount, 1) <= oldLine) shift += h.newCount - h.oldCount;
  return oldLine + shift === newLine ? null : `old_line ${oldLine} is new line ${oldLine + shift}, not ${newLine}`;
}

// === the pages ===

const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const sha1 = (s) => createHash("sha1").update(s).digest("hex");
const sha256 = (s) => createHash("sha256").update(s).digest("hex");

/** GitLab's legacy line code: `Gitlab::Git.diff_line_code(path, new_pos, old_pos)` =
 * `<sha1(path)>_<old>_<new>` (lib/gitlab/git.rb). */
const lineCode = (path, oldLine, newLine) => `${sha1(path)}_${oldLine ?? 0}_${newLine ?? 0}`;

/** Rows of a hunk paired for the parallel view as GitLab pairs them (a run of removed lines
 * beside the run of added lines after it, line by line; a context line beside itself):
 * `[{ left, right }]`, either side null. */
function parallelPairs(rows) {
  const pairs = [];
  for (let i = 0; i < rows.length;) {
    if (rows[i].type === "removed" || rows[i].type === "added") {
      const removed = [];
      const added = [];
      while (i < rows.length && rows[i].type === "removed") removed.push(rows[i++]);
      while (i < rows.length && rows[i].type === "added") added.push(rows[i++]);
      for (let k = 0; k < Math.max(removed.length, added.length); k++) pairs.push({ left: removed[k] ?? null, right: added[k] ?? null });
    } else {
      pairs.push({ left: rows[i], right: rows[i] });
      i++;
    }
  }
  return pairs;
}

/** Rapid Diffs, inline (`view` "inline") or parallel (`view` "parallel") view:
 * app/components/rapid_diffs/diff_file_component.html.haml and viewers/text/
 * inline_hunk_component.html.haml / parallel_hunk_component.html.haml + hunk_component.rb
 * (gitlabhq 3919ad72). */
function rapidFile(file, view = "inline") {
  const hash = sha256(file.new_path).slice(0, 40);
  const change = (r) => (!r ? null : r.type === "added" ? "added" : r.type === "removed" ? "removed" : r.type === "meta" ? "meta" : null);
  const dataChange = (r) => (change(r) ? ` data-change="${change(r)}"` : "");
  // hunk_component.rb line_number_cell / line_content_cell
  const numberCell = (r, side, id) => {
    const number = !r ? null : side === "old" ? r.old : r.new;
    const visible = number != null && r.type !== "meta";
    if (!visible) return `<td class="rd-line-number rd-line-number-empty"${dataChange(r)} data-position="${side}"></td>`;
    const label = r.type === "removed" ? `Removed line ${number}` : r.type === "added" ? `Added line ${number}` : `Line ${number}`;
    return `<td class="rd-line-number"${dataChange(r)} data-position="${side}"><a class="rd-line-link" data-line-number="${number}" href="#${id}" aria-label="${label}"></a></td>`;
  };
  const contentCell = (r, side) => (r
    ? `<td class="rd-line-content"${dataChange(r)}${side ? ` data-position="${side}"` : ""}><pre class="rd-line-text">${esc(r.text)}</pre></td>`
    : `<td class="rd-line-content rd-line-number-empty"${side ? ` data-position="${side}"` : ""}></td>`);
  const idOf = (r) => `line_${hash.slice(0, 8)}_${r.old ?? ""}_${r.new ?? ""}`;
  const rows = view === "parallel"
    ? file.hunks.map((h) =>
      `<tr class="rd-hunk-header rd-hunk-header-parallel" data-hunk-header="true"><td class="rd-hunk-header-buttons"></td><td class="rd-hunk-header-content" colspan="3">${esc(h.header)}</td></tr>` +
      parallelPairs(h.rows.filter((r) => r.type !== "meta")).map(({ left, right }) => {
        const id = idOf(left ?? right);
        return `<tr class="rd-hunk-lines rd-hunk-lines-parallel" id="${id}" data-testid="hunk-lines-parallel" data-hunk-lines="true">` +
          numberCell(left, "old", id) + contentCell(left, "old") + numberCell(right, "new", id) + contentCell(right, "new") + "</tr>";
      }).join("")).join("")
    : file.hunks.map((h) =>
      `<tr class="rd-hunk-header rd-hunk-header-inline" data-hunk-header="true"><td class="rd-hunk-header-buttons" colspan="2"></td><td class="rd-hunk-header-content">${esc(h.header)}</td></tr>` +
      h.rows.map((r) => {
        const id = idOf(r);
        return `<tr class="rd-hunk-lines rd-hunk-lines-inline" id="${id}" data-testid="hunk-lines-inline" data-hunk-lines="true">` +
          numberCell(r, "old", id) + numberCell(r, "new", id) + contentCell(r, null) + "</tr>";
      }).join("")).join("");
  const fileData = { viewer: `text_${view}`, diff_lines_path: `/${PROJECT_PATH}/-/blob/diff_lines/${file.new_path}`, old_path: file.old_path, new_path: file.new_path };
  const columns = view === "parallel" ? ["Original line number", "Original line", "Diff line number", "Diff line"] : ["Original line number", "Diff line number", "Diff line"];
  return `<diff-file class="rd-diff-file-component" id="${hash}" data-testid="rd-diff-file" data-file-data="${esc(JSON.stringify(fileData))}">` +
    `<article class="rd-diff-file" aria-labelledby="file-title-${hash}"><div class="rd-diff-file-header" data-testid="rd-diff-file-header">` +
    `<h2 class="rd-diff-file-title" id="file-title-${hash}"><strong>${esc(file.new_path)}</strong></h2></div>` +
    `<div class="flash-container rd-diff-file-error"></div><details class="rd-diff-file-details" open data-file-body=""><summary></summary>` +
    `<div class="rd-diff-file-body"><table class="rd-text-view-root"><thead class="gl-sr-only"><tr>${columns.map((c) => `<th>${c}</th>`).join("")}</tr></thead>` +
    `<tbody class="rd-text-view-content code code-syntax-highlight-theme">${rows}</tbody></table></div></details></article><diff-file-mounted></diff-file-mounted></diff-file>`;
}

/** Vue diffs, inline view: app/assets/javascripts/diffs/components/diff_file.vue (the file
 * container's `data-path` = new path) and diff_row.vue with utils/interoperability.js's
 * `getInteropInlineAttributes` (an attribute whose value is null is not rendered). */
function vueFile(file) {
  const attr = (name, value) => (value == null ? "" : ` ${name}="${value}"`);
  const row = (r) => {
    if (r.type === "meta") return "";
    const type = r.type === "removed" ? "old" : "new";
    const interop = attr("data-interop-type", type) + attr("data-interop-line", type === "old" ? r.old : r.new) +
      attr("data-interop-new-line", r.new) + attr("data-interop-old-line", r.old);
    const cls = r.type === "removed" ? " old" : r.type === "added" ? " new" : "";
    const code = `${lineCode(file.new_path, r.old, r.new)}`;
    return `<div class="diff-grid-row diff-tr line_holder${cls}"><div id="${code}" data-testid="left-side" class="diff-grid-left left-side"${interop}>` +
      `<div data-testid="left-line-number" class="diff-td diff-line-num${cls}">${r.old ? `<a data-linenumber="${r.old}" href="#${code}"></a>` : ""}</div>` +
      `<div class="diff-td diff-line-num${cls}">${r.new ? `<a data-linenumber="${r.new}" href="#${code}"></a>` : ""}</div>` +
      `<div class="diff-td line-coverage left-side${cls}"></div><div class="diff-td line-inline-findings left-side${cls}"></div>` +
      `<div data-testid="left-content" class="diff-td line_content with-coverage left-side${cls}"><span class="line">${esc(r.text)}</span></div></div></div>`;
  };
  const hunks = file.hunks.map((h) => `<div class="diff-grid-row diff-tr line_holder match"><div class="diff-grid-left left-side"><div class="diff-td diff-line-num"></div><div class="diff-td diff-line-num"></div><div class="diff-td line_content match">${esc(h.header)}</div></div></div>` +
    h.rows.map(row).join("")).join("");
  return `<div id="${sha1(file.new_path)}" data-path="${esc(file.new_path)}" class="diff-file file-holder"><div class="js-file-title file-title"><strong class="file-title-name">${esc(file.new_path)}</strong></div>` +
    `<div class="diff-content"><div class="diff-viewer"><div class="diff-grid diff-table code diff-wrap-lines">${hunks}</div></div></div></div>`;
}

/** Classic (HAML) diffs: app/views/projects/diffs/_file.html.haml (no `data-path`: the file is
 * named by `data-blob-diff-path`, diff_helper.rb `diff_file_html_data`, and the title) and
 * _line.html.haml (`tr.line_holder.<type>#<line_code>`, `td.old_line`/`td.new_line`
 * `[data-linenumber]`, `td.line_content[data-position]` = the position JSON of notes_helper.rb
 * `diff_view_line_data`). */
function classicFile(file, refs) {
  const row = (r) => {
    if (r.type === "meta") return `<tr class="line_holder"><td class="old_line diff-line-num"></td><td class="new_line diff-line-num"></td><td class="line_content match">${esc(r.text)}</td></tr>`;
    const type = r.type === "added" ? "new" : r.type === "removed" ? "old" : "";
    // Gitlab::Diff::Line keeps both counters on every line (old_pos on an added line is the
    // old side's next line); the links show " " on the side the line lacks.
    const oldPos = r.old ?? "";
    const newPos = r.new ?? "";
    const code = lineCode(file.new_path, r.old, r.new);
    const position = { base_sha: refs.base_sha, start_sha: refs.start_sha, head_sha: refs.head_sha, old_path: file.old_path,
      new_path: file.new_path, position_type: "text", old_line: r.type === "added" ? null : r.old, new_line: r.type === "removed" ? null : r.new };
    const cls = type ? ` ${type}` : "";
    return `<tr class="line_holder${cls}" id="${code}"><td class="old_line diff-line-num${cls}" data-linenumber="${oldPos}"><a href="#${code}" data-linenumber="${type === "new" ? " " : oldPos}"></a></td>` +
      `<td class="new_line diff-line-num${cls}" data-linenumber="${newPos}"><a href="#${code}" data-linenumber="${type === "old" ? " " : newPos}"></a></td>` +
      `<td class="line_content noteable_line${cls}" data-line-code="${code}" data-line-type="${type}" data-note-type="DiffNote" data-position="${esc(JSON.stringify(position))}">${esc(r.text)}</td></tr>`;
  };
  const hunks = file.hunks.map((h) => `<tr class="line_holder match"><td class="diff-line-num unfold js-unfold old_line" data-linenumber="..."></td><td class="diff-line-num unfold js-unfold new_line" data-linenumber="..."></td><td class="line_content match">${esc(h.header)}</td></tr>` +
    h.rows.map(row).join("")).join("");
  return `<div class="diff-file file-holder" id="${sha1(file.new_path)}" data-blob-diff-path="/${PROJECT_PATH}/-/blob_diff/${refs.head_sha}/${esc(file.new_path)}" data-view="inline">` +
    `<div class="js-file-title file-title-flex-parent"><div class="file-header-content"><strong class="file-title-name">${esc(file.new_path)}</strong></div></div>` +
    `<div class="diff-content diff-wrap-lines"><table class="code diff-wrap-lines js-syntax-highlight text-file">${hunks}</table></div></div>`;
}

const STYLE = `
body { margin: 0; padding: 16px; font: 14px system-ui, sans-serif; background: #fff; color: #333238; }
html.gl-dark body { background: #1f1e24; color: #ececef; }
diff-file, .diff-file { display: block; margin: 12px 0; border: 1px solid #dcdcde; border-radius: 4px; }
html.gl-dark diff-file, html.gl-dark .diff-file { border-color: #434248; }
.rd-diff-file-header, .file-title, .file-title-flex-parent { padding: 8px; background: #fbfafd; border-bottom: 1px solid #dcdcde; }
html.gl-dark .rd-diff-file-header, html.gl-dark .file-title, html.gl-dark .file-title-flex-parent { background: #28272d; border-color: #434248; }
table { border-collapse: collapse; width: 100%; font: 12px monospace; }
.gl-sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
a { color: inherit; text-decoration: none; }
td { padding: 0 6px; vertical-align: top; } pre { margin: 0; font: inherit; white-space: pre-wrap; }
.rd-line-number, .diff-line-num { width: 3em; color: #89888d; text-align: right; }
.rd-line-link::before { content: attr(data-line-number); }
.diff-line-num a[data-linenumber]::before { content: attr(data-linenumber); }
[data-change="added"], tr.new td, .diff-td.new { background: #ecfdf0; } [data-change="removed"], tr.old td, .diff-td.old { background: #fbe9eb; }
html.gl-dark [data-change="added"], html.gl-dark tr.new td, html.gl-dark .diff-td.new { background: #113521; }
html.gl-dark [data-change="removed"], html.gl-dark tr.old td, html.gl-dark .diff-td.old { background: #4c1d20; }
.rd-hunk-header, .match { color: #89888d; background: #f0f0f0; } html.gl-dark .rd-hunk-header, html.gl-dark .match { background: #333238; }
.diff-grid-left { display: grid; grid-template-columns: 3em 3em 0 0 1fr; font: 12px monospace; }
`;

// === the server ===

/**
 * Starts the stand-in on 127.0.0.1 (a free port).
 *
 * `repo`: the fixture repository; `base`: the merge requests' base (= start) commit; `head`:
 * their head commit, `heads`: `{ iid: sha }` for another head of merge request !1 or !2 of
 * project 42 `group/project` (change them later with `setHead`).
 *
 * Returns `{ origin, url(path), setHead(sha, iid), diffRefs(iid), files(iid), posts, requests, drafts,
 * discussions, gm, session(), reset(), close() }`:
 * - `posts`: every POST to the REST API, in order: `{ path, status, body, csrf, at }`;
 * - `requests`: every REST request as `"METHOD path"` (with the prefix it came under);
 * - `gm`: the GM stand-in's storage (a Map key → value);
 * - `session()`: a new session `{ cookie, csrf }` for requests made by the test itself;
 * - `reset({ notes })`: forget the recorded requests (and with `notes`, the notes).
 */
export async function startStandin({ repo, base, head, heads = {} }) {
  // iid → { head, files }: each merge request's current head and its diff.
  const mrs = new Map([1, 2].map((iid) => [iid, { head: heads[iid] ?? head, files: gitDiff(repo, base, heads[iid] ?? head) }]));
  const sessions = new Map(); // session id → csrf token
  const posts = [];
  const requests = [];
  const drafts = new Map([[1, []], [2, []]]); // iid → draft notes
  const discussions = new Map([[1, []], [2, []]]);
  const gm = new Map();
  let nextNoteId = 100;

  const diffRefs = (iid = 1) => ({ base_sha: base, start_sha: base, head_sha: mrs.get(iid).head });

  function newSession() {
    const id = randomBytes(16).toString("hex");
    const csrf = randomBytes(32).toString("base64");
    sessions.set(id, csrf);
    return { id, csrf };
  }
  const cookieOf = (req) => (req.headers.cookie ?? "").split(/;\s*/).map((c) => c.split("=")).find(([k]) => k === "_gitlab_session")?.[1];

  /** `late`: a file path whose file the page adds only when `window.__addLateFiles()` is called
   * (the test calls it), as GitLab's Rapid Diffs stream files in and the Vue diffs load them
   * while scrolling. */
  function page(prefix, iid, markup, theme, view, session, late = null) {
    const refs = diffRefs(iid);
    const current = mrs.get(iid);
    const render = { rapid: (f) => rapidFile(f, view), vue: vueFile, classic: (f) => classicFile(f, refs) }[markup];
    const gon = { relative_url_root: prefix, api_version: "v4", gitlab_url: "" };
    return `<!doctype html>
<html lang="en" class="${theme === "dark" ? "gl-dark" : "gl-light"}"><head><meta charset="utf-8">
<title>Merge request !${iid} · ${PROJECT_PATH} · GitLab</title>
<meta name="csrf-param" content="authenticity_token"><meta name="csrf-token" content="${esc(session.csrf)}">
<style>${STYLE}</style><script>window.gon = ${JSON.stringify(gon)};</script></head>
<body data-page="projects:merge_requests:show" data-project-id="${PROJECT_ID}" data-project-full-path="${PROJECT_PATH}" data-namespace-id="7">
<h1>Stand-in merge request !${iid}</h1><div class="merge-request-tabs-holder"></div>
<div class="files" id="diffs" data-markup="${markup}">
${current.files.filter((f) => f.new_path !== late).map(render).join("\n")}
</div>${late ? `<template id="late-files">${current.files.filter((f) => f.new_path === late).map(render).join("\n")}</template>
<script>window.__addLateFiles = () => document.getElementById("diffs").append(document.getElementById("late-files").content);</script>` : ""}</body></html>`;
  }

  /** GitLab's `:id`: the numeric id or the URL-encoded full path (doc/api/rest/_index.md,
   * "Namespaced paths"). */
  const isProject = (id) => id === String(PROJECT_ID) || decodeURIComponent(id) === PROJECT_PATH;

  function api(req, res, prefix, rest, url, body) {
    const json = (status, value, headers = {}) => res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(value));
    const session = cookieOf(req);
    // lib/api/api_guard.rb / lib/gitlab/auth/auth_finders.rb: a session cookie authenticates
    // an API request only if "the request is GET/HEAD, or if CSRF token is valid"
    // (`find_user_from_warden … if verified_request?`); otherwise there is no user: 401.
    const csrf = sessions.get(session);
    const verified = csrf && (req.method === "GET" || req.method === "HEAD" || req.headers["x-csrf-token"] === csrf);
    let status = 0;
    const answer = (s, value, headers) => { status = s; json(s, value, headers); };
    const m = rest.match(/^\/projects\/([^/]+)\/merge_requests\/(\d+)(\/.*)?$/);
    if (!verified) answer(401, { message: "401 Unauthorized" });
    // doc/api/users.md "Get the current user": the session's user (the notes' author 1).
    else if (req.method === "GET" && rest === "/user") answer(200, { id: 1, username: "reviewer", name: "Reviewer" });
    else if (!m || !isProject(m[1])) answer(404, { message: "404 Project Not Found" });
    else if (!drafts.has(Number(m[2]))) answer(404, { message: "404 Not found" });
    else {
      const iid = Number(m[2]);
      const current = mrs.get(iid);
      const tail = m[3] ?? "";
      const paged = (items) => {
        const perPage = Math.min(Math.max(Number(url.searchParams.get("per_page") ?? 20) || 20, 1), 100);
        const pageNo = Math.max(Number(url.searchParams.get("page") ?? 1) || 1, 1);
        const total = Math.max(Math.ceil(items.length / perPage), 1);
        answer(200, items.slice((pageNo - 1) * perPage, pageNo * perPage), {
          "x-page": String(pageNo), "x-per-page": String(perPage), "x-total": String(items.length), "x-total-pages": String(total),
          "x-next-page": pageNo < total ? String(pageNo + 1) : "", "x-prev-page": pageNo > 1 ? String(pageNo - 1) : "" });
      };
      if (req.method === "GET" && tail === "") {
        answer(200, { id: 1000 + iid, iid, project_id: PROJECT_ID, title: `Stand-in !${iid}`, state: "opened", sha: current.head,
          diff_refs: diffRefs(iid), web_url: `${origin}${prefix}/${PROJECT_PATH}/-/merge_requests/${iid}` });
      } else if (req.method === "GET" && tail === "/diffs") {
        paged(current.files.map(({ hunks, ...f }) => f));
      } else if (req.method === "GET" && tail === "/draft_notes") {
        answer(200, drafts.get(iid));
      } else if (req.method === "GET" && tail === "/discussions") {
        paged(discussions.get(iid));
      } else if (req.method === "POST" && tail === "/draft_notes") {
        const [s, value] = createDraft(iid, body);
        answer(s, value);
      } else if (req.method === "POST" && tail === "/draft_notes/bulk_publish") {
        // doc/api/draft_notes.md "Publish all pending draft notes": the drafts become notes.
        for (const d of drafts.get(iid).splice(0)) {
          discussions.get(iid).push({ id: sha1(`discussion ${d.id}`), individual_note: false,
            notes: [{ id: d.id, type: d.position ? "DiffNote" : "DiscussionNote", body: d.note, author: { id: 1, username: "reviewer" },
              system: false, resolvable: true, resolved: false, position: d.position ?? undefined }] });
        }
        status = 204;
        res.writeHead(204).end();
      } else answer(404, { error: "404 Not Found" });
    }
    requests.push(`${req.method} ${prefix}/api/v4${rest}`);
    if (req.method === "POST") posts.push({ path: `${prefix}/api/v4${rest}`, status, body, csrf: req.headers["x-csrf-token"] ?? null, at: Date.now() });
  }

  /** POST draft_notes (doc/api/draft_notes.md "Create a draft note"): `note` required; a
   * `position` needs `base_sha`, `start_sha`, `head_sha` (the merge request's current diff
   * refs), `position_type` and, for `text`, both `old_path` and `new_path` of a file of the diff
   * and lines by [`positionProblem`]. GitLab answers a position it cannot place with 400 and the
   * line_code validation message (the contract quotes it). */
  function createDraft(iid, body) {
    if (!body || typeof body !== "object") return [400, { error: "note is missing" }];
    if (typeof body.note !== "string" || body.note.trim() === "") return [400, { error: "note is missing" }];
    const p = body.position;
    const refused = (why) => [400, { message: "400 Bad request - Note {:line_code=>[\"can't be blank\", \"must be a valid line code\"]}", standin_reason: why }];
    let position = null;
    let code = null;
    if (p !== undefined && p !== null) {
      if (typeof p !== "object") return [400, { error: "position is invalid" }];
      for (const k of ["base_sha", "start_sha", "head_sha", "position_type"]) if (!p[k]) return [400, { error: `position[${k}] is missing` }];
      if (p.position_type !== "text") return refused(`position_type ${p.position_type} (only text here)`);
      const refs = diffRefs(iid);
      if (p.base_sha !== refs.base_sha || p.start_sha !== refs.start_sha || p.head_sha !== refs.head_sha) {
        return refused(`diff refs ${p.base_sha}/${p.start_sha}/${p.head_sha} are not the merge request's ${refs.base_sha}/${refs.start_sha}/${refs.head_sha}`);
      }
      if (!p.old_path || !p.new_path) return refused("old_path and new_path are both required");
      const file = mrs.get(iid).files.find((f) => f.old_path === p.old_path && f.new_path === p.new_path);
      if (!file) return refused(`${p.old_path} → ${p.new_path} is not a file of the diff`);
      const num = (v) => (v === undefined || v === null || v === "" ? null : Number(v));
      const problem = positionProblem(file, num(p.old_line), num(p.new_line));
      if (problem) return refused(problem);
      position = { base_sha: p.base_sha, start_sha: p.start_sha, head_sha: p.head_sha, old_path: p.old_path, new_path: p.new_path,
        position_type: "text", old_line: num(p.old_line), new_line: num(p.new_line), line_range: null };
      code = lineCode(p.new_path, position.old_line, position.new_line);
    }
    const note = { id: nextNoteId++, author_id: 1, merge_request_id: 1000 + iid, resolve_discussion: false, discussion_id: null,
      note: body.note, commit_id: null, line_code: code, position };
    drafts.get(iid).push(note);
    return [201, note];
  }

  async function readBody(req) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const text = Buffer.concat(chunks).toString("utf8");
    if (!text) return null;
    if ((req.headers["content-type"] ?? "").includes("application/x-www-form-urlencoded")) return Object.fromEntries(new URLSearchParams(text));
    try { return JSON.parse(text); } catch { return text; }
  }

  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, "http://x");
      const body = req.method === "GET" || req.method === "HEAD" ? null : await readBody(req);
      const rawPath = req.url.split("?")[0]; // keeps %2F in the project id, as GitLab's router does
      const prefix = PREFIXES.filter((p) => p && (rawPath === p || rawPath.startsWith(`${p}/`)))[0] ?? "";
      const rest = rawPath.slice(prefix.length);
      if (rest.startsWith("/api/v4/")) return api(req, res, prefix, rest.slice("/api/v4".length), url, body);
      if (rawPath === "/__test/gm" && req.method === "POST") {
        // The GM stand-in's storage: { op: get | set | delete | list, key, value }.
        const { op, key, value } = body ?? {};
        let answer = {};
        if (op === "get") answer = gm.has(key) ? { found: true, value: gm.get(key) } : { found: false };
        else if (op === "set") gm.set(key, value);
        else if (op === "delete") gm.delete(key);
        else if (op === "list") answer = { keys: [...gm.keys()] };
        else return res.writeHead(400).end("bad op");
        return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
      }
      let sid = cookieOf(req);
      const headers = { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" };
      if (!sessions.has(sid)) {
        const s = newSession();
        sid = s.id;
        headers["set-cookie"] = `_gitlab_session=${sid}; path=/; HttpOnly; SameSite=Lax`;
      }
      const mr = rest.match(/^\/group\/project\/-\/merge_requests\/(\d+)(?:\/diffs)?\/?$/);
      if (mr && drafts.has(Number(mr[1]))) {
        const markup = url.searchParams.get("markup") ?? "rapid";
        if (!["rapid", "vue", "classic"].includes(markup)) return res.writeHead(400).end("markup: rapid, vue or classic");
        const view = url.searchParams.get("view") === "parallel" ? "parallel" : "inline";
        return res.writeHead(200, headers).end(page(prefix, Number(mr[1]), markup, url.searchParams.get("theme"), view, { csrf: sessions.get(sid) }, url.searchParams.get("late")));
      }
      if (rest === "/blank") return res.writeHead(200, headers).end("<!doctype html><title>blank</title><body>blank</body>");
      if (rest === "/favicon.ico") return res.writeHead(204).end();
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
    } catch (e) {
      res.writeHead(500, { "content-type": "text/plain" }).end(String(e.stack ?? e));
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;

  return {
    origin,
    url: (path) => `${origin}${path}`,
    /** Merge request `iid`'s head is now `sha` (a new push): its pages and REST answers follow. */
    setHead(sha, iid = 1) { mrs.set(iid, { head: sha, files: gitDiff(repo, base, sha) }); },
    diffRefs,
    files: (iid = 1) => mrs.get(iid).files,
    posts,
    requests,
    drafts,
    discussions,
    gm,
    session() { const s = newSession(); return { cookie: `_gitlab_session=${s.id}`, csrf: s.csrf }; },
    /** Forgets the recorded requests; with `{ notes: true }` also every draft note and
     * discussion (never sessions or GM storage). */
    reset({ notes = false } = {}) {
      posts.length = 0;
      requests.length = 0;
      if (notes) for (const m of [drafts, discussions]) for (const v of m.values()) v.length = 0;
    },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}
