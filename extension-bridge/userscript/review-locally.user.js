// ==UserScript==
// @name         Review locally (Review Agent Gateway)
// @namespace    https://github.com/review-agent-gateway
// @version      0.1.0
// @description  Adds a "Review locally" button to GitLab merge requests: reviews the MR's commits in your local checkout through the Review Agent Gateway and shows the findings next to the diff lines.
// @match        https://gitlab.com/*/-/merge_requests/*
// @grant        none
// @run-at       document-idle
// ==/UserScript==
//
// The reference userscript of the Review Agent Gateway. Install the built copy
// (`node build.mjs` in extension-bridge/ writes dist/review-locally.user.js, with the client
// library client/index.js inlined where the marker below is).
//
// Self-hosted GitLab: the script runs only where an @match says. Either add your origin in the
// userscript manager, which keeps it across updates of the script:
//   - Tampermonkey: Dashboard → the script → Settings tab → Includes/Excludes → "User matches"
//     → Add… → `https://gitlab.example.com/*/-/merge_requests/*` (keep "Original matches" on);
//   - Violentmonkey: Dashboard → the script's Edit → Settings tab → Custom metadata →
//     "@match rules" box → one line `https://gitlab.example.com/*/-/merge_requests/*` (keep
//     "Keep original" ticked) → Save;
// or add a line under the one for gitlab.com above (reinstalling the script drops it):
//   // @match        https://gitlab.example.com/*/-/merge_requests/*
// with your GitLab's scheme and host. (GitLab under a path prefix, e.g.
// https://example.com/gitlab/, is not supported: the script reads the project from the path.)
// The companion extension needs the same origin in its options page (or it falls back to
// WebSocket / HTTP + SSE with a token, below).
//
// Transport: the companion extension when installed (no token needed), else the daemon's
// WebSocket, else HTTP + SSE on 127.0.0.1:4317; those two need the gateway token
// (`review-agent-gateway token show`). Set it once in this origin's devtools console:
//   localStorage.setItem("review-agent-gateway", JSON.stringify({ token: "..." }))
// Any other connect() option (port, transports, wsUrl) can go in the same object, and so can
// `providerId`, `model` and `language` for a review with a model provider (default: the
// gateway's `default_provider`, else rules only).
//
// Where things come from on the page:
// - project path and MR iid: the URL, `/<project path>/-/merge_requests/<iid>`;
// - diff refs: GitLab's documented REST API, GET /api/v4/projects/:id/merge_requests/:iid
//   (`diff_refs.base_sha/start_sha/head_sha`), same origin, so the GitLab session is used;
// - diff lines: each file is a `.diff-file[data-path]` (its new path). In GitLab's Vue diffs
//   (app/assets/javascripts/diffs/components/diff_row.vue) each row is a `.line_holder` whose
//   sides carry GitLab's interoperability attributes (diffs/utils/interoperability.js):
//   `data-interop-new-line` / `data-interop-old-line` are the line's number on that side, set
//   only when the line has one (`data-interop-line` follows the row's type, so it is not used).
//   Classic (HAML) diffs have `td.new_line` / `td.old_line` cells with `data-linenumber`.
//   A line not on the page (collapsed, or GitLab's newer Rapid Diffs markup) goes in the panel.
(() => {
  "use strict";

  /* @inline client/index.js */

  const mr = location.pathname.match(/^\/(.+?)\/-\/merge_requests\/(\d+)(?:\/|$)/);
  if (!mr) return;
  const [, projectPath, iid] = mr;

  function el(tag, props = {}, ...children) {
    const node = Object.assign(document.createElement(tag), props);
    node.append(...children);
    return node;
  }

  const status = el("span", { className: "review-locally-status" });
  const button = el("button", { type: "button", className: "btn btn-default review-locally-button" }, "Review locally");
  const panel = el("div", { className: "review-locally" }, button, " ", status);
  panel.style.cssText = "position:fixed;right:1em;bottom:1em;z-index:1000;padding:.5em .8em;background:#fff;border:1px solid #bbb;border-radius:4px;font:13px sans-serif";
  panel.dataset.state = "idle";

  function setStatus(state, text) {
    panel.dataset.state = state;
    status.textContent = text;
  }

  /** The diff refs of this MR from GitLab's REST API. */
  async function diffRefs() {
    const url = `/api/v4/projects/${encodeURIComponent(projectPath)}/merge_requests/${iid}`;
    const response = await fetch(url, { credentials: "same-origin", headers: { accept: "application/json" } });
    if (!response.ok) throw new Error(`GitLab answered ${response.status} for ${url}`);
    const refs = (await response.json()).diff_refs;
    if (!refs?.head_sha) throw new Error(`${url} has no diff_refs (is the MR still being prepared?)`);
    return { baseSha: refs.base_sha, startSha: refs.start_sha, headSha: refs.head_sha };
  }

  /** Shows a finding under its line in the diff, or in the panel when that line is not shown. */
  function showFinding(finding) {
    const box = el("div", { className: "review-locally-finding" },
      el("b", {}, `${finding.severity ?? "finding"}: ${finding.title}`),
      finding.content ? el("div", {}, finding.content) : "");
    box.dataset.path = finding.path;
    box.dataset.line = finding.startLine;
    box.style.cssText = "border-left:4px solid #c0392b;background:#fdecea;padding:.3em .6em;margin:.2em 0;font:13px sans-serif";
    const file = [...document.querySelectorAll(".diff-file[data-path]")].find((f) => f.dataset.path === finding.path);
    const side = finding.side === "old" ? "old" : "new";
    const line = Number(finding.startLine);
    const cell = file?.querySelector(`[data-interop-${side}-line="${line}"]`) // Vue diffs
      ?? file?.querySelector(`td.${side}_line[data-linenumber="${line}"]`); // classic diffs
    const row = cell?.closest("tr, .line_holder");
    if (row?.tagName === "TR") {
      const td = el("td", { colSpan: row.cells.length }, box);
      row.after(el("tr", { className: "review-locally-row" }, td));
    } else if (row) {
      row.after(el("div", { className: "review-locally-row" }, box));
    } else {
      box.prepend(`${finding.path}:${finding.startLine} `);
      panel.append(box);
    }
  }

  async function review() {
    button.disabled = true;
    document.querySelectorAll(".review-locally-row, .review-locally .review-locally-finding").forEach((n) => n.remove());
    try {
      setStatus("connecting", "connecting…");
      const options = JSON.parse(localStorage.getItem("review-agent-gateway") || "{}");
      const gateway = await connect(options);
      panel.dataset.transport = gateway.transportKind;
      panel.dataset.origin = gateway.hello?.origin ?? "";
      const request = {
        requestId: `userscript-${Date.now()}`,
        mode: "merge-request",
        target: { gitlabOrigin: location.origin, projectPath, mergeRequestIid: Number(iid), diffRefs: await diffRefs() },
        scope: { filePaths: null, selection: null },
        policy: { minConfidence: "low", ...(options.language && { language: options.language }) },
        ...(options.providerId && { providerId: options.providerId }),
        ...(options.model && { model: options.model }),
      };
      let found = 0;
      for await (const event of gateway.review(request)) {
        if (event.type === "finding.created") { found++; showFinding(event.finding); }
        if (event.type === "stage.changed") setStatus("running", `${event.stage ?? "running"}… (${found} findings, via ${gateway.transportKind})`);
        if (event.type === "run.failed") throw new Error(event.error?.message ?? "the review failed");
        if (event.type === "run.interrupted") setStatus("running", `the gateway stopped; resuming… (${found} findings)`);
        if (event.type === "run.completed" || event.type === "run.cancelled") {
          const run = await gateway.getRun(event.runId);
          panel.dataset.runFindings = run.findings.length;
          setStatus(event.type === "run.completed" ? "done" : "cancelled",
            `${run.state}: ${run.findings.length} findings (via ${gateway.transportKind})`);
        }
      }
    } catch (error) {
      setStatus("error", `${error.code ? error.code + ": " : ""}${error.message}${error.remediation ? " — " + error.remediation : ""}`);
    } finally {
      button.disabled = false;
    }
  }

  button.addEventListener("click", review);
  const mount = () => document.body.append(panel);
  if (document.body) mount(); else document.addEventListener("DOMContentLoaded", mount);
})();
