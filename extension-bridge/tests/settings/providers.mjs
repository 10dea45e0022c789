// The Providers page (issue 18 §2), a step of tests/settings-e2e.mjs: every [[providers]]
// entry's settings and health; a second fake provider that refuses requests without its API key
// starts `not_configured`; its key set on the page (no D-Bus here, so no keyring: the 0600 key
// file, and the page says so) turns it `ready` on the Test button and on the Status page; the
// key appears nowhere in the page, the daemon's log or the store; deleting it makes the provider
// not configured again.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

import { startFakeModel } from "../companion/fake-model.mjs";
import { flash, run as runCommand, text } from "./harness.mjs";

const KEY = `sk-settings-${randomBytes(12).toString("hex")}`;
let paid;

export async function prepare() {
  paid = await startFakeModel({ finding: { path: "none.py", line: 1, title: "-", content: "-" }, chatReadPath: "app.py",
    answer: "ok", answerDeltas: 1, deltaMs: 1, requireKey: KEY });
  // No api_key_env: the conventional OPENAI_API_KEY, which the harness sets empty.
  return { config: paid.toml("paid"), cleanup: () => paid.close() };
}

/** Every file under `dir` (not following links), skipping `skip` paths. */
function files(dir, skip) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (skip.some((s) => path.startsWith(s))) continue;
    if (entry.isDirectory()) out.push(...files(path, skip));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

export async function run({ binary, home, gw, page, go, shot, say, check }) {
  const section = (id) => page.locator(`section[data-provider="${id}"]`);
  const submit = async (locator) => {
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }), locator.click()]);
  };
  const keyFile = join(home, "config/keys/paid");

  await go("/settings/providers");
  // The first provider's settings as config.toml has them, never a key.
  const fake = await text(page, 'section[data-provider="fake"]');
  check(fake.includes("openai-compatible") && fake.includes("fake-model") && fake.includes("32768") && fake.includes("30 s"),
    `the fake provider's settings: ${fake}`);
  check(await section("fake").getAttribute("data-status") === "ready", "the fake provider is not ready");
  const before = await section("paid").getAttribute("data-status");
  check(before === "not_configured", `the keyless provider starts ${before}`);
  check(await section("paid").getAttribute("data-key-source") === "none", "the keyless provider has a key");
  const input = section("paid").locator("input[name=key]");
  check(await input.getAttribute("type") === "password" && await input.getAttribute("autocomplete") === "off",
    "the key field is not a password field with autocomplete off");

  // Test without a key: not configured, with what to do.
  await submit(section("paid").getByRole("button", { name: "Test provider paid" }));
  let f = await flash(page);
  check(f && !f.ok && f.text.includes("provider.not_configured") && f.text.includes("Store"), `test without a key: ${JSON.stringify(f)}`);

  // Set the key: no keyring here, so the key file (0600), and the flash says where.
  await section("paid").locator("input[name=key]").fill(KEY);
  await submit(section("paid").getByRole("button", { name: "Store the key of paid" }));
  f = await flash(page);
  check(f?.ok && f.text.includes(keyFile) && f.text.includes("0600") && f.text.includes("OS keyring could not be used") && f.text.includes("ready"),
    `set the key: ${JSON.stringify(f)}`);
  check(existsSync(keyFile) && (statSync(keyFile).mode & 0o777) === 0o600, `the key file ${keyFile} is not mode 0600`);
  check(readFileSync(keyFile, "utf8") === `${KEY}\n`, "the key file does not hold the key");
  check(await section("paid").getAttribute("data-status") === "ready", "the provider is not ready after the key");
  check(await section("paid").getAttribute("data-key-source") === "file", "the key is not listed as from the key file");
  check((await text(page, 'section[data-provider="paid"]')).includes(keyFile), "the key file is not named");
  // The Test button: one fresh request, ready.
  const probes = paid.requests.length;
  await submit(section("paid").getByRole("button", { name: "Test provider paid" }));
  f = await flash(page);
  check(f?.ok && /Test of paid: ready \(\d+ ms\)/.test(f.text), `test with the key: ${JSON.stringify(f)}`);
  check(paid.requests.length === probes, "the probe called the chat endpoint");
  check(!(await page.content()).includes(KEY), "the key is in the page");
  await shot("providers");
  // The Status page and the command line agree.
  await go("/settings/status");
  const status = await page.locator('#provider-health tr[data-provider="paid"]').innerText();
  check(status.includes("ready"), `the Status page: ${status}`);
  check(runCommand(binary, ["providers", "list"], { env: gw.env }).includes(`key file ${keyFile}`), "providers list does not show the key file");

  // Delete the key: gone from the file, not configured again everywhere.
  await go("/settings/providers");
  await submit(section("paid").getByRole("button", { name: "Delete the stored key of paid" }));
  f = await flash(page);
  check(f?.ok && f.text.includes(keyFile) && f.text.includes("not configured"), `delete the key: ${JSON.stringify(f)}`);
  check(!existsSync(keyFile), "the key file is still there");
  check(await section("paid").getAttribute("data-status") === "not_configured", "the provider is ready without its key");
  check(await section("paid").getAttribute("data-key-source") === "none", "a key is still listed");
  await go("/settings/status");
  const after = await page.locator('#provider-health tr[data-provider="paid"]').innerText();
  check(after.includes("not_configured"), `the Status page after the delete: ${after}`);

  // The key nowhere: the pages, the daemon's log, the store and the state directory.
  check(!(await page.content()).includes(KEY), "the key is in the Status page");
  check(!gw.stderr().includes(KEY), "the key is in the daemon's log");
  const leaked = files(home, [join(home, "repo"), join(home, "other-repo")]).filter((p) => readFileSync(p).includes(KEY));
  check(leaked.length === 0, `the key is in ${leaked.join(", ")}`);
  say("providers: settings and health shown; a key stored in the 0600 key file (no keyring) made the provider ready on Test and Status, never shown or logged; deleted, it is not configured again");
}
