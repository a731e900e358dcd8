// The real ruvio-client, with createClient pointed at the test's server and lease/semaphore/release recorded.
import { createClient as realCreateClient } from "ruvio-client";

const RECORDED = new Set(["lease", "semaphore", "release", "renew"]);

export function createClient(options) {
  const h = globalThis.__ruvioSnippetHarness;
  if (!h) throw new Error("the snippet harness is not installed");
  h.options.push(options);
  const client = realCreateClient({ ...options, port: h.port });
  h.clients.push(client);
  return new Proxy(client, {
    get(target, prop) {
      const v = target[prop];
      if (typeof v !== "function") return v;
      if (!RECORDED.has(prop)) return v.bind(target);
      return async (...args) => {
        const result = await v.apply(target, args);
        h.calls.push({ method: prop, args, result });
        return result;
      };
    },
  });
}
