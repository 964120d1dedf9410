#!/usr/bin/env node
// One entry for `npm test`, `npm run demo` and `npm run bench` on a fresh machine:
// install npm packages when they are missing, then provide nats-server and the nats CLI.
import { existsSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
if (!existsSync(join(root, "node_modules", ".package-lock.json"))) {
  const lock = existsSync(join(root, "package-lock.json"));
  console.log(`setup: installing npm packages (npm ${lock ? "ci" : "install"})`);
  const r = spawnSync("npm", [lock ? "ci" : "install", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
const { ensureTools } = await import("./setup.mjs");
await ensureTools();
