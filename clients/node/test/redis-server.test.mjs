// TLS against Debian's redis-server and against ruvio (both TLS-only: port 0 and a tls-port), and the RESP2 fallback
// when HELLO is refused, against redis-server.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { createClient as realCreateClient, ConnectionError, ReplyError } from "ruvio-client";
import { requireTool, startRedis, startRuvio } from "./helpers.mjs";

const opened = [];
const procs = [];
function createClient(opts) {
  const c = realCreateClient(opts);
  opened.push(c);
  return c;
}
let certDir;
let cert;

before(() => {
  requireTool("openssl");
  certDir = mkdtempSync(path.join(os.tmpdir(), "ruvio-node-tls-"));
  // A test CA and a certificate it signed for 127.0.0.1 (rustls, in ruvio, refuses a self-signed CA certificate
  // used as a server's own).
  execFileSync("bash", [path.join(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), "..", "..", "..", "scripts", "gen-test-certs.sh"), certDir], { stdio: "ignore" });
  cert = readFileSync(path.join(certDir, "ca.crt"));
});
after(async () => {
  for (const c of opened) c.disconnect();
  for (const p of procs) await p.cleanup();
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

for (const kind of ["redis-server", "ruvio"]) {
  test(`TLS (${kind}): tls options and rediss:// URLs connect; an untrusted certificate is a ConnectionError`, async () => {
    const s = kind === "ruvio" ? await startRuvio([]) : await startRedis([]);
    procs.push(s);
    // Restart it with TLS only, on the same port.
    await s.stop();
    const tlsArgs = (port) => [
      "--port", "0", "--tls-port", String(port),
      "--tls-cert-file", path.join(certDir, "server.crt"), "--tls-key-file", path.join(certDir, "server.key"),
      "--tls-ca-cert-file", path.join(certDir, "ca.crt"), "--tls-auth-clients", "no",
    ];
    s.argsFor = kind === "ruvio"
      ? (port) => ["server", "--dir", path.join(s.dir, "data"), ...tlsArgs(port)]
      : (port) => ["--dir", s.dir, "--save", "", "--appendonly", "no", ...tlsArgs(port)];
    await s.start(s.port);
    const c = createClient({ host: "127.0.0.1", port: s.port, tls: { ca: [cert] } });
    assert.equal(await c.set("tls:k", "v"), "OK");
    assert.equal(await c.get("tls:k"), "v");
    assert.equal(c.protocol, 3);
    const u = createClient({ url: `rediss://127.0.0.1:${s.port}/1`, tls: { ca: [cert] } });
    assert.equal(await u.get("tls:k"), null, "database 1 from the URL");
    const untrusted = createClient({ url: `rediss://127.0.0.1:${s.port}`, reconnect: false });
    await assert.rejects(untrusted.ping(), (e) => e instanceof ConnectionError && /certificate/i.test(e.message));
    // Plain TCP to a TLS port does not hang: the server closes it, or the handshake times out.
    const plain = createClient({ port: s.port, connectTimeout: 500, reconnect: false });
    await assert.rejects(plain.ping(), ConnectionError);
  });
}

test("RESP2 fallback: a server that refuses HELLO gets AUTH, CLIENT SETNAME and SELECT instead", async () => {
  const s = await startRedis(["--rename-command", "HELLO", "", "--requirepass", "pw"]);
  procs.push(s);
  const c = createClient({ port: s.port, password: "pw", name: "fallback", db: 3 });
  assert.equal(await c.set("k", "v"), "OK");
  assert.equal(c.protocol, 2);
  assert.equal(await c.call("CLIENT", "GETNAME"), "fallback");
  assert.match(await c.call("CLIENT", "INFO"), / db=3 /);
  // Pub/sub on RESP2 still works on a connection of its own.
  const sub = c.duplicate();
  opened.push(sub);
  const got = [];
  await sub.subscribe("ch", (m) => got.push(m));
  assert.equal(await c.publish("ch", "x"), 1);
  for (let i = 0; i < 200 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(got, ["x"]);
  // A wrong password on the fallback path is the server's error, not a hang.
  const bad = createClient({ port: s.port, password: "nope", reconnect: false });
  await assert.rejects(bad.ping(), (e) => e instanceof ReplyError && e.code === "WRONGPASS");
});
