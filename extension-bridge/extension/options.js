// Options page: the gateway's status through the background, and the self-hosted GitLab
// origins (each granted as a runtime host permission, with the content script registered for it).
const status = document.getElementById("status");
const list = document.getElementById("origins");
const INSTALL = "review-agent-gateway install";

chrome.runtime.sendMessage({ type: "status" }, (answer) => {
  const hello = answer?.hello;
  if (hello?.type === "hello") {
    status.textContent = `Connected through native messaging — protocol ${hello.protocolVersion}, gateway ${hello.gatewayVersion}.`;
  } else {
    status.textContent = `The native host is not reachable (${answer?.lastError ?? "no answer"}). Install it with: ${INSTALL}`;
  }
});

async function render() {
  const { gitlabOrigins } = await chrome.storage.local.get({ gitlabOrigins: [] });
  list.replaceChildren(
    ...gitlabOrigins.map((origin) => {
      const li = document.createElement("li");
      const remove = document.createElement("button");
      remove.textContent = "Remove";
      remove.onclick = async () => {
        await save(gitlabOrigins.filter((o) => o !== origin));
        await chrome.permissions.remove({ origins: [`${origin}/*`] }).catch(() => {});
        render();
      };
      li.append(`${origin} `, remove);
      return li;
    }),
  );
}

async function save(origins) {
  await chrome.storage.local.set({ gitlabOrigins: origins });
  await chrome.scripting.unregisterContentScripts({ ids: ["gitlab-origins"] }).catch(() => {});
  if (origins.length > 0) {
    await chrome.scripting.registerContentScripts([
      { id: "gitlab-origins", matches: origins.map((o) => `${o}/*`), js: ["content.js"], runAt: "document_start" },
    ]);
  }
}

document.getElementById("add").addEventListener("submit", async (event) => {
  event.preventDefault();
  const origin = new URL(document.getElementById("origin").value).origin;
  if (!(await chrome.permissions.request({ origins: [`${origin}/*`] }))) return;
  const { gitlabOrigins } = await chrome.storage.local.get({ gitlabOrigins: [] });
  if (!gitlabOrigins.includes(origin)) await save([...gitlabOrigins, origin]);
  render();
});

render();
