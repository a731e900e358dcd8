// Module resolution hook for the snippet test: inside test/snippets/, 'ruvio-client' resolves to
// recording-client.mjs, which wraps the real package (so the snippets run verbatim, port 6379 included).
export async function resolve(specifier, context, next) {
  const parent = context.parentURL ?? "";
  if (specifier === "ruvio-client" && parent.includes("/test/snippets/") && !parent.includes("recording-client")) {
    return { url: new URL("./recording-client.mjs", import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
