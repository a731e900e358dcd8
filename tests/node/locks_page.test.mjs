// The /locks page of the metrics port in headless Chromium (Debian's chromium driven by playwright-core): a real
// ruvio, leases and a semaphore taken by real clients, the rows checked in the rendered page, then a release and an
// expiry seen as recent losses after the page reloads itself; a key and a client name full of HTML stay text.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { existsSync } from "node:fs";
import Redis from "ioredis";
import { chromium } from "playwright-core";
import { startServer, target } from "./server.mjs";

const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";
const skip = target === "redis" ? "a Ruvio page (RUVIO_TEST_TARGET=redis)" : false;
const T = { timeout: 60_000, skip };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

let server;
let browser;
let metricsPort;
const clients = [];

before(async () => {
  if (skip) return;
  // A missing browser is a failure, not a skip: scripts/test.sh installs it.
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM} (apt-get install chromium)`);
  metricsPort = await freePort();
  server = await startServer(["--metrics-port", String(metricsPort)]);
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
}, T);

after(async () => {
  for (const c of clients) c.disconnect();
  await browser?.close();
  await server?.stop();
}, T);

function client(name) {
  const c = new Redis({ port: server.port, host: "127.0.0.1", connectionName: name, maxRetriesPerRequest: 0 });
  clients.push(c);
  return c;
}

async function eventually(what, fn, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      if (await fn()) return;
    } catch (e) {
      last = e; // the page may be reloading itself right now
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ""}`);
    await sleep(100);
  }
}

test("the /locks page shows holders, waiters and recent grants and losses", T, async () => {
  const evilKey = `job:<img src=x onerror="document.title='pwned'">&amp;`;
  const evilName = "<b>w&amp;1</b>";
  const a = client(evilName);
  const b = client("sem-one");
  const c = client("sem-two");
  const waiter = client("waiter");
  const shortLived = client("short");
  const jobToken = String(await a.call("LEASE", evilKey, "30000"));
  const semTokens = [String(await b.call("SEMAPHORE", "pool", "2", "30000")), String(await c.call("SEMAPHORE", "pool", "2", "30000"))];
  const shortToken = String(await shortLived.call("LEASE", "short", "1500"));
  const doomedToken = String(await shortLived.call("LEASE", "doomed", "30000"));
  const aId = String(await a.call("CLIENT", "ID"));
  // Queued behind the job lease; granted when it is released below.
  const waited = waiter.call("LEASE", evilKey, "30000", "WAIT", "20000");
  const observer = client("observer");
  await eventually("the waiter to queue", async () => /lock_waiters:1/.test(await observer.info("locks")));

  const page = await browser.newPage();
  const dialogs = [];
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    d.dismiss();
  });
  const resp = await page.goto(`http://127.0.0.1:${metricsPort}/locks`);
  assert.equal(resp.status(), 200);
  assert.match(resp.headers()["content-type"], /^text\/html/);

  // One row per holder: the lease and the two semaphore slots (and the short lease while it lasts).
  const job = page.locator(`#locks tr.holder[data-token="${jobToken}"]`);
  assert.equal(await job.count(), 1);
  assert.equal(await job.locator("td.key").innerText(), evilKey, "the key is shown as text, not markup");
  assert.equal(await job.locator("td.kind").innerText(), "lease");
  assert.equal(await job.locator("td.count").innerText(), "1 / 1");
  assert.equal(await job.locator("td.waiters").innerText(), "1");
  assert.equal(await job.locator("td.client-id").innerText(), aId);
  assert.equal(await job.locator("td.client-name").innerText(), evilName);
  assert.match(await job.locator("td.client-addr").innerText(), /^127\.0\.0\.1:\d+$/);
  const remaining = await job.locator("td.remaining").innerText();
  assert.match(remaining, /^\d+\.\d s$/);
  assert.ok(parseFloat(remaining) > 5 && parseFloat(remaining) <= 30, remaining);
  for (const [i, t] of semTokens.entries()) {
    const row = page.locator(`#locks tr.holder[data-token="${t}"]`);
    assert.equal(await row.count(), 1, `semaphore slot ${t}`);
    assert.equal(await row.locator("td.client-name").innerText(), ["sem-one", "sem-two"][i]);
  }
  assert.equal(await page.locator("#locks td.kind", { hasText: "semaphore" }).innerText(), "semaphore");
  assert.equal(await page.locator("#locks td.count", { hasText: "2 / 2" }).count(), 1);
  const granted = page.locator(`#recent tr[data-event="granted"][data-token="${jobToken}"]`);
  assert.equal(await granted.count(), 1);
  assert.equal(await granted.locator("td.client-name").innerText(), evilName);
  // Nothing in the page became markup or ran.
  assert.equal(await page.locator("img").count(), 0);
  assert.equal(await page.locator("#locks b, #recent b").count(), 0);
  assert.equal(await page.title(), "Ruvio locks");

  // A release hands the lease to the waiter; the short lease expires; DEL takes one away. The page reloads itself and
  // shows the three losses.
  assert.equal(await a.call("RELEASE", evilKey, jobToken), 1);
  assert.equal(await observer.call("DEL", "doomed"), 1);
  const waiterToken = String(await waited);
  await eventually("the page to reload with the release, the new grant and the expiry", async () => {
    const released = await page.locator(`#recent tr[data-event="released"][data-token="${jobToken}"]`).count();
    const expired = await page.locator(`#recent tr[data-event="expired"][data-token="${shortToken}"]`).count();
    const deleted = await page.locator(`#recent tr[data-event="deleted"][data-token="${doomedToken}"]`).count();
    const newHolder = await page.locator(`#locks tr.holder[data-token="${waiterToken}"]`).count();
    return released === 1 && expired === 1 && deleted === 1 && newHolder === 1;
  });
  const released = page.locator(`#recent tr[data-event="released"][data-token="${jobToken}"]`);
  assert.equal(await released.locator("td.key").innerText(), evilKey);
  assert.equal(await released.locator("td.client-name").innerText(), evilName, "a loss names whom the lock was granted to");
  assert.equal(await page.locator(`#locks tr.holder[data-token="${waiterToken}"] td.client-name`).innerText(), "waiter");
  assert.equal(await page.locator(`#locks tr.holder[data-token="${waiterToken}"] td.waiters`).innerText(), "0");
  assert.equal(await page.locator(`#locks tr.holder[data-token="${shortToken}"]`).count(), 0, "the expired lease is gone");
  assert.equal(await page.locator(`#recent tr[data-event="expired"][data-token="${shortToken}"] td.client-name`).innerText(), "short");
  assert.equal(await page.locator("img").count(), 0);
  assert.deepEqual(dialogs, []);
  assert.equal(await page.title(), "Ruvio locks");
  await page.close();
});
