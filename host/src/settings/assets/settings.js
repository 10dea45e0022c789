// The settings page's script (issue 18): progressive enhancement only — every page works
// without it. It never builds HTML from strings: text goes in through textContent.
'use strict';

// Login: the command line opens /settings/login#code=…; the code leaves the address bar (and
// the history entry) before it is posted, and never reaches a server log.
(function login() {
  const form = document.getElementById('login');
  if (!form) return;
  const take = () => {
    const match = /(?:^#|&)code=([0-9a-fA-F]{32})(?:&|$)/.exec(location.hash);
    history.replaceState(null, '', location.pathname);
    if (match) {
      form.elements.code.value = match[1];
      form.submit();
    }
  };
  take();
  // The login page already open in this tab: a new code arrives as a fragment change.
  window.addEventListener('hashchange', take);
})();

// A form that removes or replaces something asks first (without the script it does not).
document.addEventListener('submit', (event) => {
  const message = event.target.dataset?.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// The language menu applies itself.
for (const form of document.querySelectorAll('form[data-autosubmit]')) {
  const button = form.querySelector('button[type=submit]');
  if (button) button.hidden = true;
  form.querySelector('select')?.addEventListener('change', () => form.submit());
}

function cell(text, className) {
  const td = document.createElement('td');
  if (className) {
    const span = document.createElement('span');
    span.className = className;
    span.textContent = text;
    td.append(span);
  } else {
    td.textContent = text;
  }
  return td;
}

function liveStatus(ok) {
  const el = document.getElementById('live-state');
  if (el) el.textContent = ok ? el.dataset.liveText : el.dataset.offlineText;
}

// Runs: the list follows the gateway's runs as they change.
(function runsList() {
  const table = document.getElementById('runs');
  if (!table?.dataset.live) return;
  const body = table.tBodies[0];
  const source = new EventSource(table.dataset.live);
  source.addEventListener('open', () => liveStatus(true));
  source.addEventListener('error', () => liveStatus(false));
  source.addEventListener('runs', (message) => {
    const rows = JSON.parse(message.data);
    const fresh = rows.map((r) => {
      const tr = document.createElement('tr');
      tr.dataset.run = r.runId;
      tr.dataset.state = r.state;
      const link = document.createElement('a');
      link.href = '/settings/runs/' + encodeURIComponent(r.runId);
      link.textContent = r.runId;
      const first = document.createElement('td');
      first.append(link);
      const state = cell(r.state, 'badge state-' + r.state);
      if (r.error) {
        const code = document.createElement('code');
        code.textContent = r.error;
        state.append(' ', code);
      }
      const created = cell(r.createdAt);
      created.className = 'time';
      tr.append(first, cell(r.kind), cell(r.subject), state, cell(r.stage),
        cell(String(r.findings)), created);
      return tr;
    });
    body.replaceChildren(...fresh);
    document.getElementById('no-runs')?.remove();
  });
})();

// A run: its timeline grows as events are committed; when it ends, the page is read again
// (findings by file, the final state).
(function runPage() {
  const run = document.getElementById('run');
  if (!run?.dataset.live) return;
  const timeline = document.getElementById('timeline');
  const source = new EventSource(run.dataset.live);
  const terminal = new Set(['run.completed', 'run.failed', 'run.cancelled', 'run.interrupted']);
  source.addEventListener('event', (message) => {
    const e = JSON.parse(message.data);
    if (timeline.querySelector(`li[data-seq="${Number(e.seq)}"]`)) return;
    const li = document.createElement('li');
    li.dataset.seq = String(e.seq);
    li.className = 'ev-' + e.type.replace(/[^a-z.]/g, '');
    const seq = document.createElement('span');
    seq.className = 'seq';
    seq.textContent = String(e.seq);
    const type = document.createElement('code');
    type.textContent = e.type;
    const summary = document.createElement('span');
    summary.className = 'summary';
    summary.textContent = e.summary;
    li.append(seq, ' ', type, ' ', summary);
    if (e.detail) {
      const details = document.createElement('details');
      const label = document.createElement('summary');
      label.textContent = timeline.dataset.detailText;
      const pre = document.createElement('pre');
      pre.textContent = e.detail;
      details.append(label, pre);
      li.append(details);
    }
    timeline.append(li);
    if (e.type === 'finding.created') {
      const count = document.getElementById('run-findings');
      if (count) count.textContent = String(Number(count.textContent) + 1);
    }
    if (terminal.has(e.type)) {
      source.close();
      setTimeout(() => location.reload(), 300);
    }
  });
  // The stream ends with the run: read the page again for its final state.
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) setTimeout(() => location.reload(), 1000);
  });
})();

// Agents and MCP: the page is read again when a delegated session's runs or pending
// permission requests change (the stream sends their signature; the page carries its own).
(function agentsPage() {
  const page = document.getElementById('agents');
  if (!page?.dataset.live) return;
  const source = new EventSource(page.dataset.live);
  source.addEventListener('agents', (message) => {
    if (message.data !== page.dataset.signature) {
      source.close();
      location.reload();
    }
  });
})();
