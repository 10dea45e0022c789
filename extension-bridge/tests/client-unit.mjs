// Unit tests of the client library's pure parts (node --test; run by host/tests/client_unit.rs):
// Markdown parsing (what may and may not become a link or markup), GitLab diff positions (added,
// removed and unchanged lines, lines outside the hunks, refusals), the draft note body and its
// fingerprint marker, request ids, and the strings: the catalogues of host/i18n (the same keys
// and placeholders in every language; the userscript's keys all used, all there), the lookup's
// fallbacks and plurals, the choice of language. The DOM parts run in real browsers in
// companion-e2e.mjs.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { buildUserscript, I18N_DIR, META_KEYS, userscriptCatalogues } from "../build.mjs";
import {
  DEFAULT_LOCALE, diffLines, diffLineTexts, fingerprintMarker, GitLabError, markedFingerprints, MARKDOWN_MAX_CHARS, noteBody,
  notePosition, parseMarkdown, pickLocale, reviewRequestId, translator,
} from "../client/index.js";

/** The text a block list would show, links as `[text](href)`. */
function flatten(blocks) {
  const inline = (runs) => runs.map((r) => (r.type === "text" || r.type === "code" ? r.text
    : r.type === "link" ? `[${inline(r.children)}](${r.href})` : inline(r.children))).join("");
  return blocks.map((b) => (b.type === "code" ? b.text : b.type === "list" ? b.items.map(inline).join("|") : inline(b.children))).join("\n");
}
const kinds = (runs) => runs.map((r) => r.type);

test("markdown: emphasis, code spans, fences, lists, headings, quotes", () => {
  const blocks = parseMarkdown("## Why\nUse **`literal_eval`** and *not* _eval_.\n\n- one\n- two\n\n1. a\n2. b\n\n```py\nx = 1\n```\n> quoted");
  assert.deepEqual(blocks.map((b) => b.type), ["heading", "paragraph", "list", "list", "code", "quote"]);
  assert.equal(blocks[0].level, 2);
  assert.deepEqual(kinds(blocks[1].children), ["text", "strong", "text", "em", "text", "em", "text"]);
  assert.deepEqual(kinds(blocks[1].children[1].children), ["code"]);
  assert.equal(blocks[2].ordered, false);
  assert.equal(blocks[3].ordered, true);
  assert.deepEqual(blocks[4], { type: "code", language: "py", text: "x = 1" });
});

test("markdown: raw HTML stays text", () => {
  const text = '<img src=x onerror="alert(1)"><script>alert(2)</script> <b>bold?</b>';
  const [block] = parseMarkdown(text);
  assert.deepEqual(kinds(block.children), ["text"]);
  assert.equal(block.children[0].text, text);
});

test("markdown: only http(s), mailto and same-origin links", () => {
  const cases = {
    "[a](https://example.com/x)": "https://example.com/x",
    "[a](mailto:sec@example.com)": "mailto:sec@example.com",
    "[a](/group/project/-/blob/main/a.py#L3)": "/group/project/-/blob/main/a.py#L3",
    "[a](#L3)": "#L3",
  };
  for (const [md, href] of Object.entries(cases)) {
    const [link] = parseMarkdown(md)[0].children;
    assert.equal(link.type, "link", md);
    assert.equal(link.href, href, md);
  }
  for (const md of ["[a](javascript:alert(1))", "[a](/\\evil.example/x)", "[a](\\\\evil)", "[a](JaVaScRiPt:alert(1))", "[a](data:text/html,<script>x</script>)",
    "[a](//evil.example/x)", "[a](vbscript:x)", "[a]( javascript:alert(1))"]) {
    const runs = parseMarkdown(md)[0].children;
    assert.ok(runs.every((r) => r.type !== "link"), `${md} became a link: ${JSON.stringify(runs)}`);
  }
  const bare = parseMarkdown("see https://example.com/a_b.c, then")[0].children;
  assert.deepEqual(bare.map((r) => r.href ?? r.text), ["see ", "https://example.com/a_b.c", ", then"]);
});

test("markdown: hostile shapes end, and long text is cut with a note", () => {
  assert.equal(flatten(parseMarkdown("```\nno closing fence\n<b>")), "no closing fence\n<b>");
  assert.equal(flatten(parseMarkdown("**unclosed and *also `open")), "**unclosed and *also `open");
  assert.equal(flatten(parseMarkdown("snake_case_name and 2 * 3 * 4")), "snake_case_name and 2 * 3 * 4");
  const deep = "[".repeat(5000) + "x" + "](https://e.x)".repeat(5000);
  parseMarkdown(deep); // finishes
  const blocks = parseMarkdown("a".repeat(MARKDOWN_MAX_CHARS + 10));
  assert.equal(blocks.length, 2);
  assert.match(flatten(blocks.slice(1)), /cut at 20000 characters/);
});

const DIFF = "@@ -1,3 +1,4 @@\n a\n-b\n+c\n+d\n e\n@@ -10,2 +11,3 @@\n x\n+y\n z\n\\ No newline at end of file";
const REFS = { baseSha: "b".repeat(40), startSha: "s".repeat(40), headSha: "h".repeat(40) };
const FILE = { old_path: "src/old.py", new_path: "src/new.py", diff: DIFF };

test("diff lines: numbering of both sides", () => {
  assert.deepEqual(diffLines(DIFF).map((l) => `${l.kind[0]}${l.oldLine ?? "-"}/${l.newLine ?? "-"}:${l.text}`),
    ["c1/1:a", "r2/-:b", "a-/2:c", "a-/3:d", "c3/4:e", "c10/11:x", "a-/12:y", "c11/13:z"]);
  assert.deepEqual(diffLineTexts(FILE, "new", 2, 4), ["c", "d", "e"]);
  assert.deepEqual(diffLineTexts(FILE, "old", 2), ["b"]);
  assert.equal(diffLineTexts(FILE, "new", 4, 6), null); // line 5 is not in the diff
});

test("note position: added line has new_line only, removed old_line only, unchanged both", () => {
  const at = (side, line) => { const p = notePosition(FILE, side, line, REFS); return [p.old_line, p.new_line]; };
  assert.deepEqual(at("new", 3), [null, 3]);
  assert.deepEqual(at("old", 2), [2, null]);
  assert.deepEqual(at("new", 4), [3, 4]);
  assert.deepEqual(at("new", 13), [11, 13]);
  // Outside the hunks: shifted by what the hunks above added and removed.
  assert.deepEqual(at("new", 7), [6, 7]);
  assert.deepEqual(at("new", 40), [38, 40]);
  assert.deepEqual(at("old", 20), [20, 22]);
  const p = notePosition(FILE, "new", 3, REFS);
  assert.deepEqual([p.base_sha, p.start_sha, p.head_sha, p.old_path, p.new_path], [REFS.baseSha, REFS.startSha, REFS.headSha, "src/old.py", "src/new.py"]);
});

test("note position: lines a file does not have are refused", () => {
  const added = { old_path: "n.py", new_path: "n.py", new_file: true, diff: "@@ -0,0 +1,2 @@\n+a\n+b" };
  assert.deepEqual([notePosition(added, "new", 2, REFS).old_line, notePosition(added, "new", 2, REFS).new_line], [null, 2]);
  for (const [side, line] of [["new", 3], ["old", 1], ["new", 0]]) {
    assert.throws(() => notePosition(added, side, line, REFS), (e) => e instanceof GitLabError && e.code === "gitlab.position_unavailable");
  }
});

test("note body: an applicable suggestion only over the lines it quotes; HTML escaped; the marker last", () => {
  const fingerprint = `sha256:${"ab".repeat(32)}`;
  const finding = { title: "Use literal_eval", content: "`eval` runs code.", fingerprint, severity: "high", ruleId: "python.eval",
    source: "rule", side: "new", startLine: 4, endLine: 5, existingCode: "eval(x)\nrun()", suggestionCode: "ast.literal_eval(x)\nrun()\n" };
  const body = noteBody(finding, ["    eval(x)", "    run()"]);
  assert.match(body, /^\*\*Use literal\\_eval\*\*\n\n`eval` runs code\.\n\n```suggestion:-0\+1\n    ast\.literal_eval\(x\)\n    run\(\)\n```\n/);
  assert.ok(body.endsWith(fingerprintMarker(fingerprint)));
  // The quoted code is not what the lines hold (or the lines are unknown): a plain diff, never
  // a suggestion GitLab would apply to other lines.
  for (const lines of [["def load(path):", "    run()"], null]) {
    const other = noteBody(finding, lines);
    assert.doesNotMatch(other, /suggestion/);
    assert.match(other, /Suggested change:\n\n```diff\n- eval\(x\)\n- run\(\)\n\+ ast\.literal_eval\(x\)\n\+ run\(\)\n```/);
  }
  assert.doesNotMatch(noteBody({ ...finding, side: "old" }, ["eval(x)", "run()"]), /suggestion:/);
  const fenced = noteBody({ ...finding, startLine: 1, endLine: 1, existingCode: "x", suggestionCode: "```\ncode\n```" }, ["x"]);
  assert.match(fenced, /````suggestion:-0\+0\n```\ncode\n```\n````/);
  // HTML and markers in the finding's text stay text in GitLab too.
  const hostile = noteBody({ ...finding, title: "<img src=x> **t**", content: `a <img src=x onerror=y> \`<kept>\` ${fingerprintMarker(`sha256:${"cd".repeat(32)}`)}` }, null);
  assert.match(hostile, /^\*\*&lt;img src=x> \\\*\\\*t\\\*\\\*\*\*/);
  assert.match(hostile, /a &lt;img src=x onerror=y> `<kept>` &lt;!-- review-agent-gateway/);
  assert.deepEqual(markedFingerprints(hostile), [fingerprint]);
});

test("markers: only one that ends the note counts", () => {
  const a = `sha256:${"ab".repeat(32)}`;
  const b = `sha256:${"cd".repeat(32)}`;
  assert.deepEqual(markedFingerprints(`text\n${fingerprintMarker(a)}\n`), [a]);
  assert.deepEqual(markedFingerprints(`quoting ${fingerprintMarker(a)} in a reply`), []);
  assert.deepEqual(markedFingerprints(`${fingerprintMarker(b)}\n${fingerprintMarker(a)}`), [a]);
  assert.deepEqual(markedFingerprints(fingerprintMarker("sha256:zz")), []);
});

test("request id: same request, same id; any change or attempt, another", async () => {
  const request = { mode: "merge-request", target: { gitlabOrigin: "https://g.example", projectPath: "a/b", mergeRequestIid: 1,
    diffRefs: { baseSha: "1", startSha: "1", headSha: "2" } }, scope: { filePaths: null, selection: null }, policy: { minConfidence: "low" } };
  const id = await reviewRequestId(request);
  assert.match(id, /^review_[0-9a-f]{64}$/);
  const reordered = { policy: request.policy, scope: { selection: null, filePaths: null }, target: request.target, mode: request.mode, requestId: "ignored" };
  assert.equal(await reviewRequestId(reordered), id);
  const moved = structuredClone(request);
  moved.target.diffRefs.headSha = "3";
  assert.notEqual(await reviewRequestId(moved), id);
  assert.notEqual(await reviewRequestId({ ...request, policy: { minConfidence: "high" } }), id);
  assert.notEqual(await reviewRequestId(request, 1), id);
  assert.equal(await reviewRequestId(request, 0), id);
});

// === Strings ===

const catalogueFiles = readdirSync(I18N_DIR).filter((f) => f.endsWith(".json")).sort();
const catalogues = Object.fromEntries(catalogueFiles.map((f) => [f.slice(0, -".json".length), JSON.parse(readFileSync(join(I18N_DIR, f), "utf8"))]));
const placeholders = (text) => [...text.matchAll(/\{([^{}]*)\}/g)].map((m) => m[1]).sort();
const userscriptSource = readFileSync(new URL("../userscript/review-locally.user.js", import.meta.url), "utf8");

test("catalogues: flat, the same keys and placeholders in every language, plural pairs, no HTML", () => {
  assert.ok(catalogues.en && catalogues["zh-CN"], `host/i18n has ${catalogueFiles.join(", ")}`);
  for (const [lang, entries] of Object.entries(catalogues)) {
    assert.equal(Object.getPrototypeOf(entries), Object.prototype, `${lang}.json is not one object`);
    for (const [key, text] of Object.entries(entries)) {
      assert.match(key, /^[a-z0-9_]+(\.[a-z0-9_]+)+$/, `${lang}.json: key ${key}`);
      assert.equal(typeof text, "string", `${lang}.json: ${key} is not a string`);
      assert.ok(text.trim(), `${lang}.json: ${key} is empty`);
      for (const name of placeholders(text)) assert.match(name, /^[A-Za-z_]+$/, `${lang}.json: ${key} has the placeholder {${name}}`);
      assert.doesNotMatch(text, /<[a-z!/]|&[a-z#]+;/i, `${lang}.json: ${key} holds HTML`);
      const plural = key.match(/^(.*)\.(one|other)$/);
      if (plural) assert.ok(`${plural[1]}.${plural[2] === "one" ? "other" : "one"}` in entries, `${lang}.json: ${key} without its plural pair`);
    }
    if (lang === "en") continue;
    const missing = Object.keys(catalogues.en).filter((k) => !(k in entries));
    const extra = Object.keys(entries).filter((k) => !(k in catalogues.en));
    assert.deepEqual({ missing, extra }, { missing: [], extra: [] }, `${lang}.json against en.json`);
    for (const key of Object.keys(entries)) {
      assert.deepEqual(placeholders(entries[key]), placeholders(catalogues.en[key]), `${lang}.json: the placeholders of ${key}`);
    }
  }
  // Chinese has one grammatical form, but a `.one` text may still say "another one" (另一个)
  // where `.other` counts: both keys must be there (checked above), their texts may differ.
});

test("catalogues: every key the userscript looks up is there, and every userscript.* key is looked up", () => {
  // Keys are literals, so this test (and grep) finds each: no t(variable), no t(`…${x}`).
  const dynamic = [...userscriptSource.matchAll(/(?<![\w$.])t(?:\.plural)?\((?!\s*"userscript\.)[^\n]{0,40}/g)].map((m) => m[0]);
  assert.deepEqual(dynamic, [], "t() calls whose key is not a \"userscript.…\" literal");
  const plurals = new Set([...userscriptSource.matchAll(/(?<![\w$.])t\.plural\(\s*"([^"]+)"/g)].map((m) => m[1]));
  const literals = new Set([...userscriptSource.matchAll(/"(userscript\.[^"]*)"/g)].map((m) => m[1]));
  const used = new Set(Object.values(META_KEYS));
  for (const key of literals) {
    if (plurals.has(key)) {
      for (const form of ["one", "other"]) { assert.ok(`${key}.${form}` in catalogues.en, `t.plural("${key}") but no ${key}.${form} in en.json`); used.add(`${key}.${form}`); }
      assert.ok(!(key in catalogues.en), `${key} is both a text and a plural`);
    } else {
      assert.ok(key in catalogues.en, `the userscript looks up ${key}, which en.json lacks`);
      used.add(key);
    }
  }
  const unused = Object.keys(catalogues.en).filter((k) => k.startsWith("userscript.") && !used.has(k));
  assert.deepEqual(unused, [], "userscript.* keys of en.json the userscript never looks up");
  // The metadata lines of the source are the English catalogue's.
  for (const [field, key] of Object.entries(META_KEYS)) {
    assert.equal(userscriptSource.match(new RegExp(`^// @${field}\\s+(.*)$`, "m"))?.[1], catalogues.en[key], `@${field} and en.json's ${key}`);
  }
});

test("build: the userscript carries the userscript.* strings of every catalogue, and its name in each language", () => {
  const inlined = userscriptCatalogues();
  assert.deepEqual(Object.keys(inlined), ["en", ...Object.keys(catalogues).filter((l) => l !== "en")]);
  for (const [lang, entries] of Object.entries(catalogues)) {
    const mine = Object.fromEntries(Object.entries(entries).filter(([k]) => k.startsWith("userscript.")));
    assert.deepEqual(inlined[lang], mine, `the inlined ${lang} strings`);
  }
  const built = buildUserscript();
  assert.ok(!built.includes("/* @inline"), "a marker left in the built userscript");
  const object = built.match(/const CATALOGUES = \/\*.*?\*\/ (\{[\s\S]*?\n\});/)?.[1];
  assert.deepEqual(JSON.parse(object), inlined);
  assert.ok(built.includes(`// @name:zh-CN   ${catalogues["zh-CN"]["userscript.meta.name"]}\n`), built.slice(0, 600));
  assert.ok(built.includes(`// @description:zh-CN ${catalogues["zh-CN"]["userscript.meta.description"]}\n`), built.slice(0, 600));
});

test("strings: lookup in the language, else English, else the key; placeholders; plurals", () => {
  const cats = {
    en: { "a.hello": "Hello {name}", "a.files.one": "{count} file", "a.files.other": "{count} files", "a.only_en": "English only",
      "a.in_dir.one": "{count} file in {dir}", "a.in_dir.other": "{count} files in {dir}" },
    "zh-CN": { "a.hello": "你好，{name}", "a.files.one": "{count} 个文件", "a.files.other": "{count} 个文件" },
  };
  const zh = translator(cats, "zh-CN");
  const en = translator(cats, "en");
  assert.equal(zh.locale, "zh-CN");
  assert.equal(zh("a.hello", { name: "Ada" }), "你好，Ada");
  assert.equal(zh("a.only_en"), "English only");
  assert.equal(zh("a.missing"), "a.missing");
  assert.equal(en("a.hello"), "Hello {name}"); // an unfilled placeholder stays visible
  assert.equal(en("a.hello", { name: "$& {name} $1" }), "Hello $& {name} $1"); // values are not patterns
  assert.deepEqual([0, 1, 2, 21].map((n) => en.plural("a.files", n)), ["0 files", "1 file", "2 files", "21 files"]);
  assert.deepEqual([1, 2].map((n) => zh.plural("a.files", n)), ["1 个文件", "2 个文件"]);
  assert.equal(zh.plural("a.in_dir", 1, { dir: "src" }), "1 file in src"); // English for a plural zh-CN lacks
  assert.equal(en.plural("a.nope", 2), "a.nope.other");
  const unknown = translator(cats, "fr");
  assert.equal(unknown.locale, DEFAULT_LOCALE);
  assert.equal(unknown("a.hello", { name: "Ada" }), "Hello Ada");
  // The shipped catalogues: each language's own text.
  assert.equal(translator(catalogues, "zh-CN")("userscript.review.button"), "审查");
  assert.equal(translator(catalogues, "en")("userscript.review.button"), "Review");
});

test("strings: the browser's languages pick a catalogue (any zh is zh-CN), else English", () => {
  const available = ["en", "zh-CN"];
  const cases = [
    [["zh-CN"], "zh-CN"], [["zh"], "zh-CN"], [["zh-TW", "en"], "zh-CN"], [["zh-Hans-CN"], "zh-CN"], [["ZH_cn"], "zh-CN"],
    [["en-US", "zh-CN"], "en"], [["fr-FR", "zh"], "zh-CN"], [["fr", "de"], "en"], [[], "en"], [undefined, "en"], [["", null], "en"],
  ];
  for (const [preferred, want] of cases) assert.equal(pickLocale(preferred, available), want, JSON.stringify(preferred));
  assert.equal(pickLocale(["zh-TW"], ["en", "zh-CN", "zh-TW"]), "zh-TW"); // the exact tag first
  assert.equal(pickLocale(["zh-TW"], Object.keys(catalogues)), "zh-CN");
});
