// Unit tests of the client library's pure parts (node --test; run by host/tests/client_unit.rs):
// Markdown parsing (what may and may not become a link or markup), GitLab diff positions (added,
// removed and unchanged lines, lines outside the hunks, refusals), the draft note body and its
// fingerprint marker, and request ids. The DOM parts run in real browsers in companion-e2e.mjs.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  diffLines, fingerprintMarker, GitLabError, markedFingerprints, MARKDOWN_MAX_CHARS, noteBody,
  notePosition, parseMarkdown, reviewRequestId,
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
  for (const md of ["[a](javascript:alert(1))", "[a](JaVaScRiPt:alert(1))", "[a](data:text/html,<script>x</script>)",
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
  assert.deepEqual(diffLines(DIFF).map((l) => `${l.kind[0]}${l.oldLine ?? "-"}/${l.newLine ?? "-"}`),
    ["c1/1", "r2/-", "a-/2", "a-/3", "c3/4", "c10/11", "a-/12", "c11/13"]);
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

test("note body: suggestion block over the finding's lines and the marker", () => {
  const fingerprint = `sha256:${"ab".repeat(32)}`;
  const body = noteBody({ title: "Use literal_eval", content: "`eval` runs code.", fingerprint, severity: "high", ruleId: "python.eval",
    source: "rule", side: "new", startLine: 4, endLine: 6, existingCode: "eval(x)", suggestionCode: "ast.literal_eval(x)\n" });
  assert.match(body, /^\*\*Use literal_eval\*\*\n\n`eval` runs code\.\n\n```suggestion:-0\+2\nast\.literal_eval\(x\)\n```\n/);
  assert.ok(body.endsWith(fingerprintMarker(fingerprint)));
  assert.deepEqual(markedFingerprints(`${body}\n\nreply ${fingerprintMarker("sha256:zz")}`), [fingerprint]);
  const fenced = noteBody({ title: "t", content: "", fingerprint, side: "new", startLine: 1, endLine: 1, suggestionCode: "```\ncode\n```" });
  assert.match(fenced, /````suggestion:-0\+0\n```\ncode\n```\n````/);
  assert.doesNotMatch(noteBody({ title: "t", content: "", fingerprint, side: "old", startLine: 1, endLine: 1, suggestionCode: "x" }), /suggestion/);
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
