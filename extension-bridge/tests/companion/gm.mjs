// The GM stand-in: what a userscript manager (Tampermonkey, Violentmonkey, Greasemonkey 4)
// gives a script with `@grant GM.getValue`, `GM.setValue`, `GM.deleteValue`, `GM.listValues`:
// the GM4 promise API (https://wiki.greasespot.net/GM.getValue and neighbours) over storage that
// belongs to the script, not to the page's origin. No userscript manager can be installed in a
// headless browser here, so the test injects this before the userscript (a Playwright init
// script / a BiDi preload script) and keeps the values in the stand-in server (`/__test/gm`,
// gitlab-standin.mjs): they survive reloads, and the page's localStorage never holds them.
//
// Values are JSON values (the managers store structured-cloneable values; the userscript's
// `settings` and `mr:…` records are plain objects). A failed storage request rejects, as a
// manager's would when its storage fails.

/** The stand-in's source, run in the page before the userscript. */
export function gmStandinSource() {
  return `(() => {
  const call = async (op, key, value) => {
    const response = await fetch("/__test/gm", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ op, key, value }), credentials: "omit", cache: "no-store" });
    if (!response.ok) throw new Error("GM storage: HTTP " + response.status);
    return response.json();
  };
  const GM = {
    info: { scriptHandler: "companion-test GM stand-in", version: "4" },
    async getValue(key, defaultValue) { const r = await call("get", String(key)); return r.found ? r.value : defaultValue; },
    async setValue(key, value) { await call("set", String(key), value === undefined ? null : JSON.parse(JSON.stringify(value))); },
    async deleteValue(key) { await call("delete", String(key)); },
    async listValues() { return (await call("list")).keys; },
  };
  Object.defineProperty(window, "GM", { value: Object.freeze(GM), configurable: false, enumerable: false, writable: false });
})();`;
}

/**
 * `source` (a userscript) wrapped to start when a userscript manager starts it: at its
 * `@run-at` (Tampermonkey/Violentmonkey: `document-start` at once, `document-end` at
 * DOMContentLoaded, `document-idle` — the default — after it), inside a function as managers
 * wrap scripts. The test's init scripts run at document start, before the page is parsed, so a
 * script reading `meta[name=csrf-token]` or `body[data-*]` at its start would see nothing there
 * otherwise.
 */
export function asManagerRunsIt(source) {
  const runAt = source.match(/^\/\/\s*@run-at\s+(\S+)/m)?.[1] ?? "document-idle";
  const start = runAt === "document-start" ? "run();"
    : runAt === "document-end" ? 'if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run, { once: true }); else run();'
      : 'const idle = () => setTimeout(run, 0); if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", idle, { once: true }); else idle();';
  return `(() => {\nconst run = async () => {\n${source}\n};\n${start}\n})();`;
}
