// Content script of the companion extension: relays between the page (window.postMessage) and
// the background (a runtime port). Runs in top-level frames of configured GitLab origins only.
// Messages are taken only from this window itself (`event.source === window`) with this
// page's origin; what comes back carries the origin the browser reported for this page, which
// the page cannot forge.
(() => {
  const CHANNEL = "review-agent-gateway";
  // Once per page: an origin added in the options page that the manifest also matches would
  // otherwise run this twice (both share the extension's isolated world) and relay twice.
  if (window.top !== window || globalThis.reviewAgentGatewayRelay) return;
  globalThis.reviewAgentGatewayRelay = true;
  let port = null;

  function ensurePort() {
    if (port) return port;
    port = chrome.runtime.connect({ name: "review-agent-gateway-page" });
    port.onMessage.addListener(({ origin, frame }) => {
      window.postMessage({ channel: CHANNEL, dir: "from-extension", origin, frame }, location.origin);
    });
    port.onDisconnect.addListener(() => {
      port = null;
    });
    return port;
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window || event.origin !== location.origin) return;
    const data = event.data;
    if (!data || data.channel !== CHANNEL || data.dir !== "to-extension") return;
    // Presence answer from the content script itself: the page knows at once that the extension
    // is there, before the native host (which may take seconds to start) answers the hello.
    if (data.frame?.type === "hello") {
      window.postMessage({ channel: CHANNEL, dir: "from-extension", origin: location.origin,
        frame: { type: "extension.present" } }, location.origin);
    }
    try {
      ensurePort().postMessage(data.frame);
    } catch {
      port = null;
    }
  });

  // Lets the page detect the extension without a round trip to the host.
  document.documentElement.dataset.reviewAgentGateway = "extension";
})();
