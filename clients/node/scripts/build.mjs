// Builds dist/esm (ES modules) and dist/cjs (CommonJS) from src/ with the TypeScript compiler, each with its
// declarations, and marks each folder's module type with a one-line package.json.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(path.join(root, "dist"), { recursive: true, force: true });
const run = (...args) => {
  try {
    execFileSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.json"), ...args], { stdio: "inherit" });
  } catch {
    console.error("build: tsc failed");
    process.exit(1);
  }
};
run("--outDir", path.join(root, "dist/esm"));
run("--outDir", path.join(root, "dist/cjs"), "--module", "CommonJS", "--moduleResolution", "Node10");
for (const [dir, type] of [["esm", "module"], ["cjs", "commonjs"]]) {
  mkdirSync(path.join(root, "dist", dir), { recursive: true });
  writeFileSync(path.join(root, "dist", dir, "package.json"), JSON.stringify({ type }) + "\n");
}
