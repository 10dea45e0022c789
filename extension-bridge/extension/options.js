// Options page: the gateway's status through the background's native port, and the
// self-hosted GitLab origins (each a runtime host permission plus a registered content script).
//
// When the host cannot be started, it shows the exact `install` command for this browser:
// `--browser` from the browser's own name (Firefox: runtime.getBrowserInfo; Chrome family:
// navigator.userAgentData brands), `--extension-id` only when this build's id is not the
// companion's (which `install` allows by default).
const COMPANION_IDS = ["dfdnfmehigamlgmiglpnpoakceohheag", "companion@review-agent-gateway"];
const BRANDS = [["Google Chrome", "chrome"], ["Microsoft Edge", "edge"], ["Brave", "brave"],
  ["Vivaldi", "vivaldi"], ["Chromium", "chromium"]];
const $ = (id) => document.getElementById(id);

/** The `review-agent-gateway install` command that registers the host for this browser. */
async function installCommand() {
  let browser = "all";
  if (chrome.runtime.getBrowserInfo) {
    const { name } = await chrome.runtime.getBrowserInfo();
    browser = /librewolf/i.test(name) ? "librewolf" : "firefox";
  } else {
    const brands = (navigator.userAgentData?.brands ?? []).map((b) => b.brand);
    browser = BRANDS.find(([brand]) => brands.includes(brand))?.[1] ?? "all";
  }
  const id = COMPANION_IDS.includes(chrome.runtime.id) ? "" : ` --extension-id ${chrome.runtime.id}`;
  return `review-agent-gateway install --browser ${browser}${id}`;
}

async function showStatus() {
  const status = $("status");
  status.dataset.state = "checking";
  status.textContent = "Checking…";
  const answer = await chrome.runtime.sendMessage({ type: "status" }).catch((e) => ({ lastError: e.message }));
  const hello = answer?.hello;
  $("details").hidden = hello?.type !== "hello";
  $("install").hidden = true;
  if (hello?.type === "hello") {
    status.dataset.state = "connected";
    status.textContent = "Connected to the gateway.";
    $("transport").textContent = `native messaging (host ${answer.hostName})`;
    $("protocol-version").textContent = hello.protocolVersion;
    $("gateway-version").textContent = hello.gatewayVersion;
    $("extension-version").textContent = chrome.runtime.getManifest().version;
    return;
  }
  const why = hello?.error?.message?.replace(/^The native host is not reachable: /, "") ?? answer?.lastError ?? "no answer";
  const command = await installCommand();
  // Chrome: "Specified native messaging host not found." / "Access to the specified native
  // messaging host is forbidden."; Firefox: "No such native application …".
  if (/not found|no such native application|forbidden/i.test(why)) {
    status.dataset.state = "missing";
    status.textContent = `The native messaging host is not installed for this browser ("${why}"). Install it with: ${command}`;
    $("install-command").textContent = command;
    $("install").hidden = false;
  } else {
    status.dataset.state = "error";
    status.textContent = `The native host did not answer: ${why}. Run \`review-agent-gateway doctor\` to see why; if it is not installed: ${command}`;
  }
}

async function storedOrigins() {
  return (await chrome.storage.local.get({ gitlabOrigins: [] })).gitlabOrigins;
}

/** Stores the list and registers the content script for exactly those origins. */
async function save(origins) {
  await chrome.storage.local.set({ gitlabOrigins: origins });
  await chrome.scripting.unregisterContentScripts({ ids: ["gitlab-origins"] }).catch(() => {});
  if (origins.length > 0) {
    await chrome.scripting.registerContentScripts([
      { id: "gitlab-origins", matches: origins.map((o) => `${o}/*`), js: ["content.js"], runAt: "document_start" },
    ]);
  }
}

async function render() {
  const origins = await storedOrigins();
  $("origins").replaceChildren(...origins.map((origin) => {
    const remove = Object.assign(document.createElement("button"), { type: "button", className: "remove", textContent: "Remove" });
    remove.onclick = async () => {
      await save((await storedOrigins()).filter((o) => o !== origin));
      await chrome.permissions.remove({ origins: [`${origin}/*`] }).catch(() => {}); // a required one stays
      $("origins-message").textContent = `Removed ${origin}; reload its tabs.`;
      render();
    };
    const li = document.createElement("li");
    li.dataset.origin = origin;
    li.append(`${origin} `, remove);
    return li;
  }));
}

$("add").addEventListener("submit", async (event) => {
  event.preventDefault();
  const message = $("origins-message");
  const url = new URL($("origin").value);
  const origin = url.origin;
  if (!/^https?:$/.test(url.protocol)) { message.textContent = `${origin}: only http and https origins.`; return; }
  if (origin === "https://gitlab.com") { message.textContent = "https://gitlab.com is always served."; return; }
  // Must be called from the click itself (a user gesture); the browser shows its prompt.
  if (!(await chrome.permissions.request({ origins: [`${origin}/*`] }))) {
    message.textContent = `${origin} was not added: the browser's permission was not granted.`;
    return;
  }
  const origins = await storedOrigins();
  if (!origins.includes(origin)) await save([...origins, origin]);
  $("origin").value = "";
  message.textContent = `Added ${origin}; reload its tabs.`;
  render();
});

$("recheck").addEventListener("click", showStatus);
showStatus();
render();
