// Builds dist/esm (ES modules) and dist/cjs (CommonJS) from src/ with the TypeScript compiler, each with its
// declarations, and marks each folder's module type with a one-line package.json. It builds into a fresh folder and
// swaps it in at the end, so a process using dist/ meanwhile never sees it half-written.
import { execFileSync } from "node:child_process";
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const out = path.join(root, `dist.build-${process.pid}`);
rmSync(out, { recursive: true, force: true });
const run = (...args) => {
  try {
    execFileSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.json"), ...args], { stdio: "inherit" });
  } catch {
    console.error("build: tsc failed");
    process.exit(1);
  }
};
run("--outDir", path.join(out, "esm"));
run("--outDir", path.join(out, "cjs"), "--module", "CommonJS", "--moduleResolution", "Node10");
for (const [dir, type] of [["esm", "module"], ["cjs", "commonjs"]]) {
  mkdirSync(path.join(out, dir), { recursive: true });
  writeFileSync(path.join(out, dir, "package.json"), JSON.stringify({ type }) + "\n");
}
const old = path.join(root, `dist.old-${process.pid}`);
try {
  renameSync(path.join(root, "dist"), old);
} catch {
  // no previous build
}
renameSync(out, path.join(root, "dist"));
rmSync(old, { recursive: true, force: true });
