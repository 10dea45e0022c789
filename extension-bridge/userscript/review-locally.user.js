// ==UserScript==
// @name         Review locally (Review Agent Gateway)
// @namespace    https://github.com/review-agent-gateway
// @version      0.2.0
// @description  Reviews GitLab merge requests in your local checkout through the Review Agent Gateway: findings beside their lines, draft comments in one click, chat about selected lines.
// @match        https://gitlab.com/*/-/merge_requests/*
// @grant        GM.getValue
// @grant        GM.setValue
// @grant        GM.deleteValue
// @run-at       document-idle
// ==/UserScript==
//
// The reference userscript of the Review Agent Gateway: the example to copy. Install the built
// copy (`node build.mjs` in extension-bridge/ writes dist/review-locally.user.js, with the client
// library client/index.js inlined where the marker below is); everything reusable (transports,
// Markdown, GitLab's REST API, the three diff markups) is in that library.
//
// What it does on a merge-request page (draft §7–§12, §15):
// - "Review" streams a review of the merge request's commits: progress by stage with counts, a
//   cancel button, each finding beside its line (or in the panel when the line is not on the
//   page) with severity, confidence, source, Markdown text, evidence links and the suggestion as a
//   small diff; one rule firing on several lines of a file is one expandable item.
// - The run id and last seq are kept per merge request, so a reloaded page shows the same run
//   again, finished or not; the requestId is derived from the request (merge request, commits,
//   policy), so reviewing the same thing twice is the same run (draft §12).
// - "Add draft comment" creates a GitLab draft note (your pending review) at the finding's line
//   with the page's own session; the note carries the finding's fingerprint as an invisible
//   marker, so the button never posts it twice and later reviews show it as commented. Nothing
//   is ever posted by itself (draft §15); the gateway never sees a GitLab token.
// - "Dismiss" remembers the finding as dismissed in the gateway (per project and fingerprint);
//   "Review new commits" reviews only what changed since the last review, keeping its findings.
// - Select lines in the diff (or a file's header for the whole file) and "Ask": a chat about
//   them, streamed, with the model's tool calls as they happen and a stop button.
//
// Self-hosted GitLab: add your origin as a user @match in the userscript manager (Tampermonkey:
// the script's Settings tab → "User matches"; Violentmonkey: Settings → "@match rules"), e.g.
// `https://gitlab.example.com/*/-/merge_requests/*`; GitLab under a path prefix
// (https://example.com/gitlab/) works, the prefix is found from the page.
//
// Transport: the companion extension when installed (no token needed), else the daemon's
// WebSocket, else HTTP + SSE on 127.0.0.1:4317, which need the gateway token (`review-agent-gateway
// token show`): paste it in the panel's ⚙ settings. It is kept in the userscript manager's own
// storage (GM.setValue), which scripts of the GitLab page cannot read — never in the page's
// localStorage (a token left there by version 0.1 is moved out on first run).
//
// Language: every text it shows comes from the `userscript.*` keys of host/i18n/<lang>.json
// (English and Simplified Chinese, shared with the gateway's settings page; build.mjs inlines
// them below), in the browser's language or the one chosen in ⚙ ("Interface language").
(async () => {
  "use strict";

  /* @inline client/index.js */
  const CATALOGUES = /* @inline host/i18n */ {};

  // Managers run the script at document-idle (@run-at); anything that injects it earlier waits.
  if (document.readyState === "loading") await new Promise((r) => document.addEventListener("DOMContentLoaded", r, { once: true }));
  const page = mergeRequestPage(document);
  if (!page) return;
  const project = { gitlabOrigin: page.origin, projectPath: page.projectPath };
  const gitlab = new GitLab({ base: page.base, project: page.projectId ?? page.projectPath, iid: page.iid, csrfToken: page.csrfToken });
  const mrKey = `mr:${page.base}/${page.projectPath}!${page.iid}`;
  const STAGES = ["resolve", "diff", "rules", "model", "validate", "done"];

  // --- Storage: the userscript manager's (GM4 API), else this page view only ---
  const memory = new Map();
  const memoryStorage = {
    getValue: async (k, d) => (memory.has(k) ? memory.get(k) : d),
    setValue: async (k, v) => { memory.set(k, v); },
    deleteValue: async (k) => { memory.delete(k); },
  };
  const storage = typeof GM !== "undefined" && GM.getValue ? GM : memoryStorage;
  /** The settings, read from storage once per page view (⚙ Save replaces them). */
  let settingsPromise = null;
  function loadSettings() {
    settingsPromise ??= (async () => {
      const stored = await storage.getValue("settings", {});
      const legacy = localStorage.getItem("review-agent-gateway");
      if (legacy && storage !== memoryStorage) {
        try { Object.assign(stored, JSON.parse(legacy)); } catch { /* not JSON: dropped */ }
        await storage.setValue("settings", stored);
        localStorage.removeItem("review-agent-gateway");
      }
      return stored;
    })().catch((e) => { settingsPromise = null; throw e; });
    return settingsPromise;
  }
  // --- Language: the one chosen in ⚙, else the browser's ---
  let t = null;
  const useLanguage = (choice) => {
    const wanted = choice ? [choice] : navigator.languages?.length ? navigator.languages : [navigator.language];
    t = translator(CATALOGUES, pickLocale(wanted, Object.keys(CATALOGUES)));
  };
  useLanguage((await loadSettings().catch(() => ({}))).uiLanguage);
  /** Labels of the protocol's values (a value this script does not know shows as it is). */
  const stageLabel = (s) => ({ resolve: t("userscript.stage.resolve"), diff: t("userscript.stage.diff"), rules: t("userscript.stage.rules"),
    model: t("userscript.stage.model"), validate: t("userscript.stage.validate"), done: t("userscript.stage.done") })[s] ?? s;
  const severityLabel = (s) => ({ critical: t("userscript.severity.critical"), high: t("userscript.severity.high"), medium: t("userscript.severity.medium"),
    low: t("userscript.severity.low"), info: t("userscript.severity.info") })[s] ?? s;
  const confidenceLabel = (c) => ({ high: t("userscript.confidence.high"), medium: t("userscript.confidence.medium"), low: t("userscript.confidence.low") })[c] ?? c;
  const sourceLabel = (f) => ({ rule: t("userscript.source.rule"), model: t("userscript.source.model"),
    analyzer: t("userscript.source.analyzer", { name: f.analyzer ?? "" }).trim() })[f.source] ?? f.source;

  let mrState = await storage.getValue(mrKey, {});
  const saveState = (patch) => { mrState = { ...mrState, ...patch }; return storage.setValue(mrKey, mrState); };
  /** Keeps a run's last seq: at once in memory, in storage at most every 500 ms (a storage write
   * per event was one userscript-manager round trip per finding); every other saveState writes
   * it too. */
  let seqTimer = null;
  function saveSeq(seq) {
    mrState.lastSeq = seq;
    seqTimer ??= setTimeout(() => { seqTimer = null; storage.setValue(mrKey, mrState); }, 500);
  }

  // --- DOM helpers ---
  function el(tag, props = {}, ...children) {
    const { data, ...rest } = props;
    const node = Object.assign(document.createElement(tag), rest);
    for (const [k, v] of Object.entries(data ?? {})) if (v != null) node.dataset[k] = String(v);
    node.append(...children.flat().filter((c) => c != null && c !== false));
    return node;
  }
  const button = (action, text = "", title = "") => el("button", { type: "button", className: "rag-btn", title, data: { ragAction: action } }, text);
  /** Sets a button's text and tooltip; `ariaLabel` names one whose text is a symbol (⚙, ×). */
  const label = (node, text, title = "", ariaLabel = null) => {
    Object.assign(node, { textContent: text, title });
    if (ariaLabel) node.setAttribute("aria-label", ariaLabel);
    return node;
  };
  const describe = (error) => `${error.code ? `${error.code}: ` : ""}${error.message}${error.remediation ? ` — ${error.remediation}` : ""}`;
  const lineLabel = (f) => (f.endLine && f.endLine !== f.startLine ? `L${f.startLine}–${f.endLine}` : `L${f.startLine}`);
  const blobUrl = (path, start, end, sha) => `${page.base}/${page.projectPath}/-/blob/${sha}/${path.split("/").map(encodeURIComponent).join("/")}#L${start}${end && end !== start ? `-${end}` : ""}`;

  document.head.append(el("style", { textContent: styleSheet() }));

  // --- The panel ---
  const ui = {
    heading: el("b"),
    review: button("review"),
    newCommits: button("review-new-commits"),
    cancel: button("cancel"),
    settingsButton: button("settings"),
    collapse: button("collapse"),
    status: el("span", { className: "rag-status" }),
    progress: el("div", { className: "rag-progress", data: { rag: "progress" } }),
    error: el("div", { className: "rag-error", data: { rag: "error" } }),
    dismissed: el("div", { className: "rag-dismissed", data: { rag: "dismissed-count" } }),
    unplaced: el("div", { className: "rag-unplaced", data: { rag: "unplaced" } }),
    skipped: el("details", { className: "rag-skipped", data: { rag: "skipped" }, hidden: true }),
    chat: el("div", { className: "rag-chat", data: { rag: "chat", state: "idle" }, hidden: true }),
    settings: el("form", { className: "rag-settings", data: { rag: "settings" }, hidden: true }),
    ask: Object.assign(button("ask"), { className: "rag-btn rag-ask", hidden: true }),
  };
  ui.newCommits.hidden = true;
  ui.cancel.hidden = true;
  const panel = el("div", { id: "review-agent-gateway", className: "rag-panel", data: { state: "idle", markup: diffMarkup(document) } },
    el("div", { className: "rag-bar" }, ui.heading, ui.review, ui.newCommits, ui.cancel, ui.settingsButton, ui.collapse),
    ui.status, ui.progress, ui.error, ui.settings, ui.dismissed, ui.unplaced, ui.skipped, ui.chat);
  document.body.append(panel, ui.ask);
  /** The panel's own texts, in the interface language (again when ⚙ changes it). */
  function labelPanel() {
    panel.lang = ui.ask.lang = t.locale;
    ui.heading.textContent = t("userscript.panel.title");
    label(ui.review, t("userscript.review.button"));
    label(ui.newCommits, t("userscript.review_new_commits.button"), t("userscript.review_new_commits.title"));
    label(ui.cancel, t("userscript.cancel.button"));
    label(ui.settingsButton, "⚙", t("userscript.settings.button"), t("userscript.settings.button"));
    labelCollapse();
  }
  function labelCollapse() {
    const folded = Boolean(panel.dataset.collapsed);
    const text = folded ? t("userscript.panel.unfold") : t("userscript.panel.fold");
    label(ui.collapse, folded ? "+" : "–", text, text);
  }
  labelPanel();

  function setState(state, text) {
    panel.dataset.state = state;
    ui.status.textContent = text;
    const live = state === "running" || state === "connecting";
    ui.review.disabled = live;
    ui.newCommits.disabled = live;
    ui.cancel.hidden = state !== "running";
    if (state !== "error" && state !== "failed") ui.error.textContent = "";
    // No stages and counts for a review that never started (an error before its run).
    ui.progress.hidden = state === "error" && !view?.stage;
  }
  /** Shows an error with the remediation that fits this page: the ⚙ settings for the token. */
  async function showError(error) {
    const settings = await loadSettings().catch(() => ({}));
    let remediation = error.remediation ?? null;
    if (error.code === "auth.token_missing" || error.code === "auth.token_invalid") {
      remediation = t("userscript.error.token_missing", { command: "review-agent-gateway token show" });
    } else if (error.code === "gateway.unavailable" && !settings.token) {
      remediation = `${remediation ?? ""} ${t("userscript.error.no_extension", { command: "review-agent-gateway token show" })}`.trim();
    }
    ui.error.textContent = describe({ ...error, code: error.code, message: error.message, remediation });
  }

  // --- Connection (one per page view; reconnects after a failure) ---
  let gatewayPromise = null;
  function gateway() {
    gatewayPromise ??= loadSettings().then((s) => connect(s)).then((g) => {
      panel.dataset.transport = g.transportKind;
      panel.dataset.origin = g.hello?.origin ?? ""; // the origin the extension vouched for
      return g;
    }).catch((e) => {
      gatewayPromise = null;
      throw e;
    });
    return gatewayPromise;
  }

  // --- Findings ---
  /** Per review shown: groups by rule and path, findings by fingerprint, their items and the
   * pointer rows, notes and dismissals, and the diff's files by path. Each finding is looked up
   * here, never in the page (a page of a large merge request has hundreds of thousands of
   * elements: a selector per finding made a review quadratic). */
  let view = null;
  function resetView(run) {
    pendingFindings = [];
    document.querySelectorAll(".rag-row").forEach((n) => n.remove());
    ui.unplaced.replaceChildren();
    ui.skipped.replaceChildren();
    ui.skipped.hidden = true;
    ui.dismissed.replaceChildren();
    view = { run, stage: null, files: null, groups: new Map(), findings: new Map(), items: new Map(), refs: [], noted: new Map(),
      dismissed: new Set(), headSha: run.headSha, diffIndex: new DiffFileIndex(document) };
    renderProgress();
  }

  function renderProgress() {
    const summary = view.summary;
    const shown = [...view.findings.values()].filter((f) => f.status !== "dismissed").length;
    const d = ui.progress.dataset;
    d.stage = view.stage ?? "";
    d.files = view.files ?? "";
    d.findings = shown;
    if (summary) { d.filesReviewed = summary.reviewed; d.filesSkipped = summary.skipped; }
    ui.progress.replaceChildren(
      el("span", { className: "rag-stages" }, ...STAGES.filter((s) => s !== "model" || view.hasModel).map((s) => el("span", { className: `rag-stage${s === view.stage ? " rag-current" : ""}${STAGES.indexOf(s) < STAGES.indexOf(view.stage) ? " rag-past" : ""}`, data: { stage: s } }, stageLabel(s)))),
      el("span", {}, [
        view.files != null ? t.plural("userscript.progress.files", view.files) : null,
        summary ? t("userscript.progress.reviewed_skipped", { reviewed: summary.reviewed, skipped: summary.skipped }) : null,
        t.plural("userscript.progress.findings", shown),
        view.tool ? t("userscript.progress.tool", { tool: view.tool }) : null,
      ].filter(Boolean).join(" · ")));
    const hidden = [...view.findings.values()].filter((f) => f.status === "dismissed").length;
    ui.dismissed.replaceChildren(...(hidden ? [`${t.plural("userscript.dismissed.count", hidden)} `,
      button("show-dismissed", panel.dataset.showDismissed ? t("userscript.dismissed.hide") : t("userscript.dismissed.show"))] : []));
  }

  function evidenceLinks(finding) {
    const others = (finding.evidence ?? []).filter((e) => e.path !== finding.path || e.startLine > finding.endLine || e.endLine < finding.startLine);
    if (!others.length) return null;
    return el("div", { className: "rag-evidence" }, t("userscript.finding.see_also"), ...others.flatMap((e, i) => {
      const link = el("a", { href: blobUrl(e.path, e.startLine, e.endLine, view.headSha), target: "_blank", rel: "noopener noreferrer", title: e.quote ?? "", data: { path: e.path, line: e.startLine } }, `${e.path}:${lineLabel(e)}`);
      link.addEventListener("click", (event) => { if (jumpTo(e.path, "new", e.startLine)) event.preventDefault(); });
      return i ? [t("userscript.list.separator"), link] : [link];
    }));
  }

  function suggestionDiff(finding) {
    if (finding.suggestionCode == null) return null;
    const lines = (text, sign, cls) => String(text ?? "").replace(/\n$/, "").split("\n").map((l) => el("span", { className: cls }, `${sign} ${l}\n`));
    return el("pre", { className: "rag-suggestion" }, ...(finding.existingCode != null ? lines(finding.existingCode, "-", "rag-del") : []), ...lines(finding.suggestionCode, "+", "rag-add"));
  }

  function jumpTo(path, side, line) {
    const row = findDiffRow(document, path, side, line, view?.diffIndex);
    if (!row) return false;
    row.scrollIntoView({ block: "center" });
    row.classList.add("rag-flash");
    setTimeout(() => row.classList.remove("rag-flash"), 1500);
    return true;
  }

  /** Findings received and not shown yet. A review's findings arrive hundreds at a time, and
   * each change of the page makes the browser lay out and pre-paint the whole diff again (up to
   * hundreds of ms on a large merge request), so they are shown in batches: once no finding
   * came for QUIET_MS, or MAX_WAIT_MS after the first one waiting (bench/companion.sh: showing
   * each finding at once made 1,000 findings take over a minute). */
  const QUIET_MS = 40;
  const MAX_WAIT_MS = 400;
  let pendingFindings = [];
  let flushTimer = null;
  let firstPending = 0;
  function queueFinding(finding) {
    const now = performance.now();
    if (!pendingFindings.length) firstPending = now;
    pendingFindings.push(finding);
    clearTimeout(flushTimer);
    flushTimer = setTimeout(flushFindings, Math.max(0, Math.min(QUIET_MS, firstPending + MAX_WAIT_MS - now)));
  }
  /** Shows the findings received so far (before any other event is handled, so a run's end
   * never comes before its findings). */
  function flushFindings() {
    clearTimeout(flushTimer);
    flushTimer = null;
    const batch = pendingFindings;
    pendingFindings = [];
    if (!batch.length) return;
    for (const f of batch) showFinding(f);
    renderProgress();
  }

  /** Shows one finding: in its group (rule + path), the group beside its first line. The
   * progress is the caller's to render. */
  function showFinding(finding) {
    if (view.findings.has(finding.fingerprint)) return; // the same finding twice (a replay)
    const f = { ...finding, status: finding.status === "dismissed" || view.dismissed.has(finding.fingerprint) ? "dismissed" : "draft" };
    view.findings.set(f.fingerprint, f);
    const key = `${f.ruleId ?? f.title}\u0000${f.path}`;
    let group = view.groups.get(key);
    if (!group) {
      const body = el("div", { className: "rag-body" }, el("div", { className: "rag-markdown" }, renderMarkdown(f.content ?? "")));
      const list = el("ul", { className: "rag-occurrences" });
      const count = el("span", { className: "rag-count" });
      const summary = el("summary", {}, el("span", { className: `rag-sev rag-sev-${f.severity}` }, severityLabel(f.severity)), " ", el("b", {}, f.title), " ", count);
      const details = el("details", { open: true }, summary,
        el("div", { className: "rag-meta" }, [t("userscript.finding.confidence", { confidence: confidenceLabel(f.confidence) }), sourceLabel(f), f.ruleId].filter(Boolean).join(" · ")),
        body, list);
      const node = el("div", { className: "rag-group", lang: t.locale, data: { ruleId: f.ruleId ?? "", path: f.path, severity: f.severity, count: 0 } }, details);
      group = { node, details, body, list, countNode: count, count: 0, first: f, evidence: new Set() };
      view.groups.set(key, group);
      const row = findDiffRow(document, f.path, f.side, f.startLine, view.diffIndex);
      if (row) insertAfterRow(row, node, "rag-row").dataset.fingerprint = f.fingerprint; else ui.unplaced.append(node);
    }
    group.count++;
    group.node.dataset.count = group.count;
    if (group.count === 2) group.details.open = false; // several places: one item to expand
    const evidence = evidenceLinks(f);
    if (evidence && !group.evidence.has(evidence.textContent)) { group.evidence.add(evidence.textContent); group.body.append(evidence); }

    const publish = button("publish", t("userscript.finding.publish.button"), t("userscript.finding.publish.title"));
    const dismiss = button("dismiss", t("userscript.finding.dismiss.button"), t("userscript.finding.dismiss.title"));
    const where = el("a", { href: blobUrl(f.path, f.startLine, f.endLine, view.headSha), className: "rag-where" }, `${f.path}:${lineLabel(f)}`);
    where.addEventListener("click", (event) => { if (jumpTo(f.path, f.side, f.startLine)) event.preventDefault(); });
    const item = el("li", { className: "rag-finding", data: { fingerprint: f.fingerprint, path: f.path, line: f.startLine, side: f.side, severity: f.severity, status: f.status, carriedOver: f.carriedOver ? "true" : null } },
      where, f.carriedOver ? [" ", el("span", { className: "rag-tag", title: t("userscript.finding.carried_over.title") }, t("userscript.finding.carried_over.label"))] : null, " ", publish, " ", dismiss,
      el("span", { className: "rag-note" }), suggestionDiff(f));
    group.list.append(item);
    countPlaces(group, f.path); // (with this item: it counts the list's)
    view.items.set(f.fingerprint, item);
    publish.addEventListener("click", () => publishFinding(f, item));
    dismiss.addEventListener("click", () => dismissFinding(f, item));
    const ref = group.count > 1 ? addPointer(group, f) : null;
    markNoted(f.fingerprint);
    // What refreshHidden does, for the one finding that changed (it walked every group and
    // every pointer row of the page per finding).
    const show = Boolean(panel.dataset.showDismissed);
    item.hidden = !show && item.dataset.status === "dismissed";
    group.node.hidden = item.hidden && [...group.list.children].every((i) => i.hidden);
    if (ref) ref.hidden = !show && f.status === "dismissed";
  }

  /** A pointer row beside the line of a group's other place `f` (the group sits beside its
   * first); null when that line is not on the page. */
  function addPointer(group, f) {
    const row = findDiffRow(document, f.path, f.side, f.startLine, view.diffIndex);
    if (!row) return null;
    const ref = el("a", { href: "#", className: "rag-ref", lang: t.locale, data: { fingerprint: f.fingerprint } }, `⚑ ${t("userscript.finding.pointer", { title: f.title, line: lineLabel(group.first) })}`);
    view.refs.push(ref);
    ref.addEventListener("click", (event) => { event.preventDefault(); group.details.open = true; group.node.scrollIntoView({ block: "center" }); });
    insertAfterRow(row, ref, "rag-row").dataset.fingerprint = f.fingerprint;
    ref.hidden = !panel.dataset.showDismissed && f.status === "dismissed";
    return ref;
  }

  function markNoted(fingerprint) {
    const kind = view.noted.get(fingerprint);
    const item = kind ? view.items.get(fingerprint) : null;
    if (!kind || !item) return;
    const f = view.findings.get(fingerprint);
    if (f.status !== "dismissed") f.status = "published";
    item.dataset.status = f.status;
    const publish = item.querySelector('[data-rag-action="publish"]');
    Object.assign(publish, { disabled: true, textContent: kind === "draft" ? t("userscript.finding.draft_exists") : t("userscript.finding.comment_exists") });
    publish.dataset.published = "true";
  }

  /** "(N places in path)": the places of a group not dismissed (all of them when shown). */
  function countPlaces(group, path) {
    const show = Boolean(panel.dataset.showDismissed);
    const n = show ? group.count : [...group.list.children].filter((i) => i.dataset.status !== "dismissed").length;
    group.countNode.textContent = n > 1 ? t.plural("userscript.finding.places", n, { path }) : "";
  }

  function refreshHidden() {
    const show = Boolean(panel.dataset.showDismissed);
    for (const group of view.groups.values()) {
      const items = [...group.list.children];
      for (const item of items) item.hidden = !show && item.dataset.status === "dismissed";
      group.node.hidden = items.every((i) => i.hidden);
      countPlaces(group, group.first.path);
    }
    for (const ref of view.refs) ref.hidden = !show && view.findings.get(ref.dataset.fingerprint)?.status === "dismissed";
    renderProgress();
  }

  let diffsCache = null; // GitLab's diff of the merge request, per head
  async function publishFinding(f, item) {
    const publish = item.querySelector('[data-rag-action="publish"]');
    const note = item.querySelector(".rag-note");
    publish.disabled = true;
    note.textContent = ` ${t("userscript.finding.posting")}`;
    try {
      const mr = await gitlab.mergeRequest();
      if (mr.diffRefs.headSha !== view.headSha) {
        throw new GitLabError("review.outdated", t("userscript.error.outdated.message", { head: mr.diffRefs.headSha.slice(0, 8), reviewed: view.headSha.slice(0, 8) }),
          t("userscript.error.outdated.remediation"));
      }
      // Fresh from GitLab, so a note added meanwhile (another tab, a colleague) is not repeated.
      view.noted = await gitlab.notedFingerprints();
      if (!view.noted.has(f.fingerprint)) {
        if (diffsCache?.head !== mr.diffRefs.headSha) diffsCache = { head: mr.diffRefs.headSha, diffs: await gitlab.diffs() };
        const file = diffsCache.diffs.find((d) => (f.side === "old" ? d.old_path : d.new_path) === f.path);
        if (!file) throw new GitLabError("gitlab.position_unavailable", t("userscript.error.not_in_diff.message", { path: f.path }), t("userscript.error.not_in_diff.remediation"));
        const position = notePosition(file, f.side, f.startLine, mr.diffRefs);
        await gitlab.createDraftNote(noteBody(f, diffLineTexts(file, f.side, f.startLine, f.endLine)), position);
        view.noted.set(f.fingerprint, "draft");
      }
      note.textContent = "";
      for (const fp of view.noted.keys()) markNoted(fp);
    } catch (error) {
      note.textContent = ` ${describe(error)}`;
      publish.disabled = false;
    }
  }

  async function dismissFinding(f, item) {
    const note = item.querySelector(".rag-note");
    const undo = f.status === "dismissed";
    try {
      const g = await gateway();
      if (undo) await g.undismiss(project, f.fingerprint); else await g.dismiss(project, f);
      f.status = undo ? "draft" : "dismissed";
      item.dataset.status = f.status;
      label(item.querySelector('[data-rag-action="dismiss"]'), undo ? t("userscript.finding.dismiss.button") : t("userscript.finding.restore.button"),
        undo ? t("userscript.finding.dismiss.title") : t("userscript.finding.restore.title"));
      if (undo) markNoted(f.fingerprint);
      refreshHidden();
    } catch (error) {
      note.textContent = ` ${describe(error)}`;
    }
  }

  // --- Runs ---
  /** Follows a run's events (a new review, or the stored one after a reload) into the view. */
  async function follow(events, { restoring = false } = {}) {
    setState("running", restoring ? t("userscript.status.reattached") : t("userscript.status.reviewing"));
    let createdAt = null; // when the gateway created the run (an earlier one, for a replay)
    try {
      for await (const event of events) {
        if (event.type !== "finding.created") flushFindings();
        if (event.seq) saveSeq(event.seq);
        switch (event.type) {
          case "run.created":
            createdAt = Date.parse(event.at);
            panel.dataset.runId = event.runId;
            saveState({ runId: event.runId, lastSeq: event.seq });
            if (cancelRequested) cancelRun(); // pressed before the run had an id
            break;
          case "stage.changed":
            view.stage = event.stage;
            view.tool = null;
            view.hasModel ||= event.stage === "model";
            if (event.files) view.summary = event.files; // once the rules ran
            renderProgress();
            break;
          case "context.added":
            if (event.context.kind === "diff") view.files = event.context.files;
            if (event.context.kind === "revisions") view.headSha = event.context.headSha;
            if (event.context.kind === "model") view.hasModel = true;
            renderProgress();
            break;
          case "tool.started": view.tool = event.tool; renderProgress(); break;
          case "finding.created": queueFinding(event.finding); break;
          case "run.completed": {
            finish(event);
            const done = { head: view.headSha.slice(0, 8), transport: panel.dataset.transport };
            setState("done", event.fromCache ? t("userscript.status.done_cached", done) : t("userscript.status.done", done));
            await saveState({ state: "completed", completed: { runId: event.runId, headSha: view.headSha } });
            break;
          }
          case "run.failed":
            finish(event);
            setState("failed", t("userscript.status.failed"));
            showError(event.error ?? {});
            await saveState({ state: "failed" });
            break;
          case "run.cancelled":
            setState("cancelled", t("userscript.status.cancelled"));
            await saveState({ state: "cancelled" });
            break;
          case "run.interrupted":
            setState(restoring ? "interrupted" : "running", restoring ? t("userscript.status.interrupted") : t("userscript.status.resuming"));
            break;
          default: break;
        }
      }
      flushFindings();
    } catch (error) {
      flushFindings();
      if (restoring && error.code === "run.not_found") { await storage.deleteValue(mrKey); mrState = {}; setState("idle", ""); return { state: "idle" }; }
      setState("error", "");
      if (error.code === "gateway.unavailable" && mrState.runId) {
        error.remediation = `${error.remediation ?? ""} ${t("userscript.error.resume_later")}`.trim();
      }
      showError(error);
    }
    updateNewCommits();
    return { state: panel.dataset.state, createdAt };
  }

  function finish(event) {
    const skipped = event.skippedFiles ?? [];
    view.summary = { reviewed: (event.reviewedFiles ?? []).length, skipped: skipped.length };
    renderProgress();
    if (skipped.length) {
      // Files an incremental review left alone are not "not reviewed": their findings came along.
      const unchanged = skipped.filter((s) => s.reason === "unchanged_since").length;
      const other = skipped.length - unchanged;
      ui.skipped.hidden = false;
      ui.skipped.replaceChildren(el("summary", {}, [other ? t.plural("userscript.skipped.not_reviewed", other) : null,
        unchanged ? t.plural("userscript.skipped.unchanged", unchanged) : null].filter(Boolean).join(t("userscript.skipped.separator"))),
        el("ul", {}, ...skipped.map((s) => el("li", { data: { path: s.path, reason: s.reason } },
          `${s.path} — ${s.reason === "unchanged_since" ? t("userscript.skipped.reason.unchanged_since") : s.reason}${s.detail ? ` (${s.detail})` : ""}`))));
    }
  }

  async function loadMarks() {
    const [dismissals, noted] = await Promise.allSettled([gateway().then((g) => g.dismissals(project)), gitlab.notedFingerprints()]);
    if (dismissals.status === "fulfilled") for (const d of dismissals.value.dismissals ?? []) view.dismissed.add(d.fingerprint);
    if (noted.status === "fulfilled") view.noted = noted.value;
    else ui.error.textContent = t("userscript.error.notes_unreadable", { error: describe(noted.reason) });
    for (const f of view.findings.values()) {
      if (view.dismissed.has(f.fingerprint) && f.status !== "dismissed") {
        f.status = "dismissed";
        const item = view.items.get(f.fingerprint);
        if (item) { item.dataset.status = "dismissed"; label(item.querySelector('[data-rag-action="dismiss"]'), t("userscript.finding.restore.button"), t("userscript.finding.restore.title")); }
      }
      markNoted(f.fingerprint);
    }
    refreshHidden();
  }

  async function review({ incremental = false } = {}) {
    setState("connecting", t("userscript.status.connecting"));
    try {
      const [g, mr, settings] = await Promise.all([gateway(), gitlab.mergeRequest(), loadSettings()]);
      const since = incremental ? mrState.completed : null;
      const request = {
        mode: "merge-request",
        target: { gitlabOrigin: page.origin, projectPath: page.projectPath, mergeRequestIid: page.iid, diffRefs: mr.diffRefs },
        scope: { filePaths: null, selection: null, ...(since && { sinceCommit: since.headSha, previousRunId: since.runId }) },
        policy: { minConfidence: "low", ...(settings.language && { language: settings.language }) },
        ...(settings.providerId && { providerId: settings.providerId }),
        ...(settings.model && { model: settings.model }),
      };
      // The same review again is the same run (draft §12), unless the last one of it was
      // cancelled or failed: then a new attempt.
      const base = await reviewRequestId(request);
      const again = mrState.baseRequestId === base && ["cancelled", "failed"].includes(mrState.state);
      const first = mrState.baseRequestId === base ? (mrState.attempt ?? 0) + (again ? 1 : 0) : 0;
      // This page may not know the last attempt (another browser, cleared storage): a run that
      // the gateway created before this click (a fresh one is created after it; 250 ms for the
      // two clocks' rounding) and that ended failed or cancelled is an earlier attempt replayed,
      // so the next attempt starts a fresh run.
      for (let attempt = first; attempt < first + 10; attempt++) {
        request.requestId = await reviewRequestId(request, attempt);
        cancelRequested = false;
        await saveState({ baseRequestId: base, attempt, requestId: request.requestId, headSha: mr.diffRefs.headSha, state: "running", runId: null, lastSeq: 0 });
        resetView({ headSha: mr.diffRefs.headSha });
        const marks = loadMarks();
        const clicked = Date.now();
        const outcome = await follow(g.review(request));
        await marks;
        const replayed = ["failed", "cancelled"].includes(outcome.state) && outcome.createdAt != null && outcome.createdAt < clicked - 250;
        if (!replayed) break;
      }
    } catch (error) {
      setState("error", "");
      showError(error);
    }
  }

  async function restore() {
    if (!mrState.runId) return updateNewCommits();
    resetView({ headSha: mrState.headSha });
    panel.dataset.runId = mrState.runId;
    try {
      const g = await gateway();
      const marks = loadMarks();
      // Every stored event from the start: the page is new, so each is shown once.
      await follow(g.events(mrState.runId, 0), { restoring: true });
      await marks;
    } catch (error) {
      setState("error", "");
      showError(error);
    }
  }

  /** The merge request as this page shows it (its diff refs when the page loaded): what a
   * selection on the page refers to. Review and publish read GitLab afresh instead. */
  let pageMrPromise = null;
  const pageMergeRequest = () => (pageMrPromise ??= gitlab.mergeRequest().catch((e) => { pageMrPromise = null; throw e; }));
  async function updateNewCommits() {
    let mrHead;
    try { mrHead = (await pageMergeRequest()).diffRefs.headSha; } catch { return; }
    ui.newCommits.hidden = !(mrState.completed && mrState.completed.headSha !== mrHead);
    if (!ui.newCommits.hidden) ui.newCommits.title = t("userscript.review_new_commits.title_since", { head: mrState.completed.headSha.slice(0, 8) });
  }

  ui.review.addEventListener("click", () => review());
  ui.newCommits.addEventListener("click", () => review({ incremental: true }));
  let cancelRequested = false;
  async function cancelRun() {
    cancelRequested = !mrState.runId; // no id yet: cancelled as soon as run.created brings it
    if (cancelRequested) { ui.status.textContent = t("userscript.status.cancelling"); return; }
    try { await (await gateway()).cancel(mrState.runId, "user_cancelled"); } catch (error) { showError(error); }
  }
  ui.cancel.addEventListener("click", cancelRun);
  panel.addEventListener("click", (event) => {
    if (event.target.dataset?.ragAction !== "show-dismissed") return;
    if (panel.dataset.showDismissed) delete panel.dataset.showDismissed; else panel.dataset.showDismissed = "true";
    refreshHidden();
  });

  // --- Settings ---
  ui.settingsButton.addEventListener("click", async () => {
    const s = await loadSettings();
    const field = (name, text, value, type = "text") => el("label", {}, text, " ", el("input", { name, type, value: value ?? "", autocomplete: "off" }));
    // Each language under its own name; "" follows the browser.
    const language = el("select", { name: "uiLanguage" }, el("option", { value: "" }, t("userscript.settings.language.auto")),
      ...Object.keys(CATALOGUES).map((code) => el("option", { value: code }, translator(CATALOGUES, code)("userscript.language.name"))));
    language.value = CATALOGUES[s.uiLanguage] ? s.uiLanguage : "";
    ui.settings.replaceChildren(
      field("token", t("userscript.settings.token"), s.token, "password"), field("port", t("userscript.settings.port"), s.port ?? DEFAULT_PORT, "number"),
      field("providerId", t("userscript.settings.provider"), s.providerId), field("model", t("userscript.settings.model"), s.model),
      el("label", {}, t("userscript.settings.language.label"), " ", language),
      el("small", {}, storage !== memoryStorage ? t("userscript.settings.kept") : t("userscript.settings.not_kept")),
      button("save-settings", t("userscript.settings.save")));
    ui.settings.hidden = !ui.settings.hidden;
  });
  ui.settings.addEventListener("click", async (event) => {
    if (event.target.dataset?.ragAction !== "save-settings") return;
    const form = new FormData(ui.settings);
    const s = Object.fromEntries([...form].map(([k, v]) => [k, String(v).trim()]).filter(([, v]) => v));
    if (s.port) s.port = Number(s.port);
    await storage.setValue("settings", s);
    settingsPromise = Promise.resolve(s);
    gatewayPromise = null;
    const before = t.locale;
    useLanguage(s.uiLanguage);
    const relabel = t.locale !== before;
    if (relabel) { labelPanel(); updateNewCommits(); }
    ui.settings.hidden = true;
    ui.error.textContent = ""; // an error about the old settings no longer holds
    if (panel.dataset.state === "error") setState("idle", "");
    ui.status.textContent = t("userscript.settings.saved");
    // Another language: the review shown is shown again in it (its events replayed, as after a
    // reload); one still running shows what comes next in it.
    if (relabel && mrState.runId && !["running", "connecting"].includes(panel.dataset.state)) await restore();
    else if (relabel && view) renderProgress();
  });
  ui.collapse.addEventListener("click", () => {
    if (panel.dataset.collapsed) delete panel.dataset.collapsed; else panel.dataset.collapsed = "true";
    labelCollapse();
  });

  // Files GitLab renders later (Rapid Diffs streams them, the Vue diffs load them as you scroll):
  // findings waiting in the panel move beside their line once it is on the page.
  let placeTimer = null;
  new MutationObserver(() => {
    if (!view || !ui.unplaced.firstChild || placeTimer) return;
    placeTimer = setTimeout(() => {
      placeTimer = null;
      const onPage = new Set(diffFiles(document).flatMap((file) => [file.newPath, file.oldPath])); // one read of the page
      for (const group of view.groups.values()) {
        if (group.node.parentElement !== ui.unplaced || !onPage.has(group.first.path)) continue;
        const f = group.first;
        const row = findDiffRow(document, f.path, f.side, f.startLine, view.diffIndex);
        if (!row) continue;
        insertAfterRow(row, group.node, "rag-row").dataset.fingerprint = f.fingerprint;
        for (const item of [...group.list.children].slice(1)) addPointer(group, view.findings.get(item.dataset.fingerprint));
      }
    }, 300);
  }).observe(document.body, { childList: true, subtree: true });

  // --- Chat on a selection (draft §7) ---
  let selection = null;
  let selectionTimer = null;
  let chat = null; // { context, messages, runId, stream }
  document.addEventListener("selectionchange", () => {
    clearTimeout(selectionTimer);
    selectionTimer = setTimeout(() => {
      const s = window.getSelection();
      const lines = selectedDiffLines(s);
      if (!lines || panel.contains(s.anchorNode)) { ui.ask.hidden = true; return; }
      selection = lines;
      const rect = s.getRangeAt(0).getBoundingClientRect();
      Object.assign(ui.ask.style, { top: `${window.scrollY + rect.bottom + 4}px`, left: `${window.scrollX + rect.left}px` });
      ui.ask.textContent = t("userscript.chat.ask", { where: `${lines.path}:${lineLabel(lines)}` });
      ui.ask.hidden = false;
    }, 120);
  });
  ui.ask.addEventListener("click", () => {
    ui.ask.hidden = true;
    chat = { context: selection, messages: [] };
    ui.chat.hidden = false;
    ui.chat.dataset.state = "idle";
    ui.chat.replaceChildren(
      el("div", { className: "rag-chat-context" }, t("userscript.chat.about", { where: `${selection.path}:${lineLabel(selection)}` }), " ",
        label(button("close-chat"), "×", t("userscript.chat.close"), t("userscript.chat.close"))),
      el("div", { className: "rag-chat-log" }),
      el("textarea", { name: "question", rows: 3, placeholder: t("userscript.chat.placeholder"), ariaLabel: t("userscript.chat.question") }),
      button("send", t("userscript.chat.send")), " ", Object.assign(button("stop", t("userscript.chat.stop")), { disabled: true }));
    ui.chat.querySelector("textarea").focus();
  });
  ui.chat.addEventListener("click", (event) => {
    const action = event.target.dataset?.ragAction;
    if (action === "send") sendChat();
    if (action === "stop") stopChat();
    if (action === "close-chat") { stopChat(); ui.chat.hidden = true; }
  });

  async function sendChat() {
    const textarea = ui.chat.querySelector("textarea");
    const question = textarea.value.trim();
    if (!question || ui.chat.dataset.state === "running") return;
    textarea.value = "";
    const log = ui.chat.querySelector(".rag-chat-log");
    const answer = el("div", { className: "rag-chat-answer rag-markdown" });
    const tools = el("ul", { className: "rag-tools" });
    log.append(el("div", { className: "rag-chat-question" }, question), tools, answer);
    chat.messages.push({ role: "user", content: question });
    ui.chat.dataset.state = "running";
    ui.chat.querySelector('[data-rag-action="stop"]').disabled = false;
    let text = "";
    let pending = false;
    const render = () => { pending = false; answer.replaceChildren(renderMarkdown(text)); };
    try {
      const [g, settings] = await Promise.all([gateway(), loadSettings()]);
      const c = chat.context;
      const diffRefs = (await pageMergeRequest()).diffRefs;
      chat.stream = g.chat({
        requestId: `chat_${crypto.randomUUID()}`,
        messages: chat.messages,
        context: { kind: "selection", gitlabOrigin: page.origin, projectPath: page.projectPath, mergeRequestIid: page.iid,
          filePath: c.path, startLine: c.startLine, endLine: c.endLine, text: c.text,
          headSha: c.side === "old" ? diffRefs.baseSha : diffRefs.headSha },
        toolsEnabled: true,
        ...(settings.providerId && { providerId: settings.providerId }),
        ...(settings.model && { model: settings.model }),
      });
      for await (const event of chat.stream) {
        if (event.type === "run.created") { chat.runId = event.runId; ui.chat.dataset.runId = event.runId; }
        if (event.type === "text.delta") { text += event.text; if (!pending) { pending = true; requestAnimationFrame(render); } }
        if (event.type === "tool.started") {
          tools.append(el("li", { className: "rag-tool", data: { tool: event.tool, callId: event.callId, state: "started" } },
            el("code", {}, event.tool), " ", el("span", {}, JSON.stringify(event.input ?? {}).slice(0, 200))));
        }
        if (event.type === "tool.completed") {
          const li = tools.querySelector(`[data-call-id="${CSS.escape(event.callId)}"]`);
          if (li) {
            li.dataset.state = "completed";
            li.dataset.ok = String(event.ok);
            const outcome = !event.ok ? t("userscript.chat.tool.failed", { code: event.error?.code ?? "" })
              : event.durationMs != null ? t("userscript.chat.tool.done_in", { ms: event.durationMs }) : t("userscript.chat.tool.done");
            li.append(el("details", {}, el("summary", {}, outcome),
              el("pre", {}, event.outputPreview ?? event.error?.message ?? "")));
          }
        }
        if (event.type === "run.failed") throw Object.assign(new Error(event.error?.message ?? t("userscript.chat.failed")), event.error ?? {});
        if (event.type === "run.cancelled") { ui.chat.dataset.state = "stopped"; text += `${text ? " " : ""}*${t("userscript.chat.stopped")}*`; }
      }
      render();
      if (ui.chat.dataset.state === "running") ui.chat.dataset.state = "done";
      chat.messages.push({ role: "assistant", content: text });
    } catch (error) {
      render();
      ui.chat.dataset.state = "error";
      log.append(el("div", { className: "rag-error" }, describe(error)));
    } finally {
      ui.chat.querySelector('[data-rag-action="stop"]').disabled = true;
    }
  }

  async function stopChat() {
    if (!chat || ui.chat.dataset.state !== "running") return;
    ui.chat.dataset.state = "stopped";
    try { if (chat.runId) await (await gateway()).cancel(chat.runId, "user_cancelled"); } catch { /* ended meanwhile */ }
  }

  await restore();

  /** The panel's look: GitLab's own palette, light and dark (`html.gl-dark`, or the system's
   * dark scheme with GitLab's "auto" theme, `html.gl-system`). */
  function styleSheet() {
    return `
.rag-panel, .rag-row, .rag-ask { --rag-bg:#fff; --rag-fg:#3a383f; --rag-muted:#737278; --rag-border:#dcdcde; --rag-soft:#f6f6f7;
  --rag-add:#ddfbe6; --rag-del:#fdd4cd; --rag-critical:#8d1300; --rag-high:#c91c00; --rag-medium:#9e5400; --rag-low:#1f75cb; --rag-info:#737278; --rag-link:#1068bf; --rag-badge-fg:#fff;
  font: 13px/1.45 var(--default-regular-font, system-ui, sans-serif); color: var(--rag-fg); }
html.gl-dark .rag-panel, html.gl-dark .rag-row, html.gl-dark .rag-ask { --rag-bg:#28272d; --rag-fg:#ececef; --rag-muted:#bfbfc3; --rag-border:#4c4b51; --rag-soft:#333238;
  --rag-add:#0d532a; --rag-del:#8d1300; --rag-critical:#fcb5aa; --rag-high:#fc9403; --rag-medium:#e9be74; --rag-low:#63a6e9; --rag-info:#bfbfc3; --rag-link:#63a6e9; --rag-badge-fg:#1f1e24; }
@media (prefers-color-scheme: dark) { html.gl-system .rag-panel, html.gl-system .rag-row, html.gl-system .rag-ask { --rag-bg:#28272d; --rag-fg:#ececef; --rag-muted:#bfbfc3; --rag-border:#4c4b51; --rag-soft:#333238;
  --rag-add:#0d532a; --rag-del:#8d1300; --rag-critical:#fcb5aa; --rag-high:#fc9403; --rag-medium:#e9be74; --rag-low:#63a6e9; --rag-info:#bfbfc3; --rag-link:#63a6e9; --rag-badge-fg:#1f1e24; } }
.rag-panel { position: fixed; right: 1em; bottom: 1em; z-index: 1000; width: 30em; max-height: 70vh; overflow: auto; padding: .6em .8em;
  background: var(--rag-bg); border: 1px solid var(--rag-border); border-radius: 6px; box-shadow: 0 4px 12px rgba(0,0,0,.15); }
.rag-bar { display: flex; gap: .4em; align-items: center; position: sticky; top: -.6em; padding: .2em 0; background: var(--rag-bg); z-index: 1; } .rag-bar b { flex: 1; }
.rag-btn { font: inherit; color: var(--rag-fg); background: var(--rag-soft); border: 1px solid var(--rag-border); border-radius: 4px; padding: .1em .6em; cursor: pointer; }
.rag-btn:disabled { opacity: .6; cursor: default; }
.rag-status, .rag-meta, .rag-dismissed, .rag-progress { color: var(--rag-muted); display: block; }
.rag-stages { display: flex; gap: .3em; margin: .3em 0; } .rag-stage { padding: 0 .4em; border-radius: 3px; background: var(--rag-soft); }
.rag-stage.rag-past { opacity: .6; } .rag-stage.rag-current { background: var(--rag-low); color: #fff; font-weight: 600; }
.rag-error { color: var(--rag-high); white-space: pre-wrap; } .rag-error:empty { display: none; }
.rag-group { border-left: 4px solid var(--rag-high); background: var(--rag-bg); color: var(--rag-fg); padding: .3em .6em; margin: .3em 0; border-radius: 0 4px 4px 0; }
.rag-group summary { cursor: pointer; } .rag-count { color: var(--rag-muted); }
.rag-sev { font-size: 11px; font-weight: 600; text-transform: uppercase; padding: 0 .4em; border-radius: 3px; color: var(--rag-badge-fg); background: var(--rag-info); }
.rag-group[data-severity="critical"] { border-left-color: var(--rag-critical); } .rag-group[data-severity="medium"] { border-left-color: var(--rag-medium); }
.rag-group[data-severity="low"] { border-left-color: var(--rag-low); } .rag-group[data-severity="info"] { border-left-color: var(--rag-info); }
.rag-sev-critical { background: var(--rag-critical); } .rag-sev-high { background: var(--rag-high); } .rag-sev-medium { background: var(--rag-medium); } .rag-sev-low { background: var(--rag-low); }
.rag-markdown p { margin: .3em 0; } .rag-markdown code, .rag-suggestion { background: var(--rag-soft); border-radius: 3px; font: 12px monospace; }
.rag-markdown pre { background: var(--rag-soft); padding: .4em; overflow: auto; }
.rag-suggestion { display: block; padding: .3em; margin: .3em 0; white-space: pre; overflow: auto; }
.rag-add { background: var(--rag-add); display: block; } .rag-del { background: var(--rag-del); display: block; }
.rag-occurrences { margin: .3em 0; padding-left: 1.2em; } .rag-finding { margin: .2em 0; }
.rag-finding[data-status="dismissed"] > :not(button) { opacity: .55; }
.rag-where { overflow-wrap: anywhere; }
.rag-panel[data-collapsed] > :not(.rag-bar, .rag-status, .rag-progress, .rag-error) { display: none; }
.rag-tag { font-size: 11px; color: var(--rag-muted); border: 1px solid var(--rag-border); border-radius: 3px; padding: 0 .3em; margin-left: .3em; }
.rag-note { color: var(--rag-muted); } .rag-group a, .rag-chat a { color: var(--rag-link); } .rag-ref { font-size: 12px; color: var(--rag-muted); margin-left: 1em; }
.rag-row > td { padding: .2em .5em; background: var(--rag-bg); }
.rag-flash { outline: 2px solid var(--rag-low); }
.rag-ask { position: absolute; z-index: 1001; box-shadow: 0 2px 6px rgba(0,0,0,.2); }
.rag-chat { border-top: 1px solid var(--rag-border); margin-top: .5em; padding-top: .4em; }
.rag-chat textarea { width: 100%; box-sizing: border-box; font: inherit; background: var(--rag-bg); color: var(--rag-fg); border: 1px solid var(--rag-border); }
.rag-chat-question { font-weight: 600; margin-top: .4em; } .rag-tools { margin: .2em 0; padding-left: 1.2em; color: var(--rag-muted); }
.rag-tool[data-state="started"]::after { content: " …"; }
.rag-settings label { display: block; margin: .2em 0; } .rag-settings input { font: inherit; width: 60%; }
.rag-skipped summary { cursor: pointer; color: var(--rag-muted); }
`;
  }
})();
