// Test helpers installed in every page (an init script before the userscript) as `window.__t`,
// so each step's in-page function stays short. They read the diff the way
// /work/notes/rapid-diffs.md describes GitLab's three markups, and the userscript's DOM of the
// contract (/work/notes/issue17-contract.md, "The userscript's DOM"). They only read and click;
// they never change what the userscript shows.

/** The helpers' source. */
export function pageHelpersSource() {
  return `(() => {
  const t = {};
  /** "rapid" | "vue" | "classic" | "none": the markup of this page's diff. */
  t.markup = () => document.querySelector("diff-file") ? "rapid" : document.querySelector(".diff-grid-row") ? "vue"
    : document.querySelector("tr.line_holder") ? "classic" : "none";
  /** The file container of \`path\` (its new path). */
  t.fileOf = (path) => {
    const m = t.markup();
    if (m === "rapid") return [...document.querySelectorAll("diff-file")].find((f) => JSON.parse(f.dataset.fileData).new_path === path) ?? null;
    if (m === "vue") return [...document.querySelectorAll(".diff-file[data-path]")].find((f) => f.dataset.path === path) ?? null;
    if (m === "classic") return [...document.querySelectorAll(".diff-file")].find((f) => f.querySelector(".file-title-name")?.textContent === path) ?? null;
    return null;
  };
  /** The diff row of line \`line\` on \`side\` ("new" | "old") of \`path\`. */
  t.rowOf = (path, line, side = "new") => {
    const file = t.fileOf(path);
    if (!file) return null;
    const m = t.markup();
    if (m === "rapid") return file.querySelector('[data-position="' + side + '"] [data-line-number="' + line + '"]')?.closest("tr") ?? null;
    if (m === "vue") return file.querySelector("[data-interop-" + side + '-line="' + line + '"]')?.closest(".diff-grid-row") ?? null;
    return [...file.querySelectorAll("tr.line_holder")].find((tr) => !tr.classList.contains(side === "new" ? "old" : "new") &&
      tr.querySelector("td." + side + "_line")?.dataset.linenumber === String(line)) ?? null;
  };
  /** Whether finding \`el\` is shown beside its line: a \`.rag-row\` among the rows right after
   * the diff row of its line holds it, or (another place of a group of one rule in one file,
   * shown once) holds a pointer with its \`data-fingerprint\`. */
  t.placed = (el, path, line, side) => {
    let next = t.rowOf(path, line, side)?.nextElementSibling;
    while (next && next.classList.contains("rag-row")) {
      if (next.contains(el) || next.querySelector('[data-fingerprint="' + el.dataset.fingerprint + '"]')) return true;
      next = next.nextElementSibling;
    }
    return false;
  };
  /** Whether \`el\` is shown: neither it nor an ancestor is \`hidden\`, \`display: none\` or
   * \`visibility: hidden\` (a collapsed \`<details>\` still counts as shown: one click away). */
  t.visible = (el) => {
    if (!el || !el.isConnected) return false;
    if (getComputedStyle(el).visibility === "hidden") return false;
    for (let e = el; e; e = e.parentElement) if (e.hidden || getComputedStyle(e).display === "none") return false;
    return true;
  };
  t.panel = () => document.getElementById("review-agent-gateway");
  /** The panel's state, progress and findings (each with where it is shown). */
  t.state = () => {
    const panel = t.panel();
    if (!panel) return null;
    const progress = panel.querySelector('[data-rag="progress"]');
    const findings = [...document.querySelectorAll(".rag-finding")].map((el) => {
      const d = el.dataset;
      const publish = el.querySelector('button[data-rag-action="publish"]');
      return { fingerprint: d.fingerprint, path: d.path, line: Number(d.line), side: d.side || "new", severity: d.severity,
        status: d.status, carriedOver: d.carriedOver === "true", visible: t.visible(el),
        placed: t.placed(el, d.path, Number(d.line), d.side || "new"), inPanel: panel.contains(el),
        text: el.textContent.slice(0, 300), markdownHtml: (el.querySelector(".rag-markdown") ?? el.closest(".rag-group")?.querySelector(".rag-markdown"))?.innerHTML.slice(0, 500) ?? null,
        publish: publish ? { disabled: publish.disabled, published: publish.dataset.published === "true", text: publish.textContent.trim() } : null };
    });
    // Anything shown twice: a finding, or a pointer row to one (a restore that re-inserts).
    const counts = new Map();
    for (const el of document.querySelectorAll(".rag-finding[data-fingerprint], .rag-row [data-fingerprint]:not(.rag-finding):not(.rag-finding *)")) {
      const key = (el.classList.contains("rag-finding") ? "finding " : "pointer ") + el.dataset.fingerprint;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    const duplicates = [...counts].filter(([, n]) => n > 1).map(([k, n]) => k + " ×" + n);
    return { ...panel.dataset, progress: progress ? { ...progress.dataset } : null, duplicates,
      error: panel.querySelector('[data-rag="error"]')?.textContent ?? null,
      dismissedCount: panel.querySelector('[data-rag="dismissed-count"]')?.textContent ?? null,
      skipped: [...panel.querySelectorAll('[data-rag="skipped"] li[data-path]')].map((li) => ({ path: li.dataset.path, reason: li.dataset.reason })),
      buttons: [...panel.querySelectorAll("button[data-rag-action]")].filter(t.visible).map((b) => b.dataset.ragAction),
      findings };
  };
  /** Clicks the visible \`button[data-rag-action=action]\` (inside \`scope\`, a selector); whether one was there. */
  t.click = (action, scope) => {
    const root = scope ? document.querySelector(scope) : document;
    const button = [...(root?.querySelectorAll('button[data-rag-action="' + action + '"]') ?? [])].find(t.visible);
    if (!button) return false;
    button.click();
    return true;
  };
  /** Selects the text of diff line \`line\` of \`path\` (its content cell) as a user's drag would. */
  t.selectLine = (path, line) => {
    const row = t.rowOf(path, line, "new");
    const cell = row?.querySelector("pre, .line_content, td:last-child");
    if (!cell) return false;
    const range = document.createRange();
    range.selectNodeContents(cell);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    cell.dispatchEvent(new MouseEvent("mouseup", { bubbles: true }));
    document.dispatchEvent(new Event("selectionchange"));
    return true;
  };
  window.__t = t;
})();`;
}
