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

// The console's browser tests (test/browser) drive a real Chromium: Debian's package, installed
// here when missing and this runs as root with apt-get; otherwise those tests are skipped and say so.
if ((process.env.npm_lifecycle_event ?? "test") === "test") ensureChromium();

function ensureChromium() {
  const paths = [process.env.RUNWAY_CHROMIUM, "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].filter(Boolean);
  if (paths.some((p) => existsSync(p))) return;
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const apt = spawnSync("apt-get", ["--version"], { stdio: "ignore" }).status === 0;
  if (!root || !apt) {
    console.log(
      "setup: no chromium (and no root apt-get to install it): the console's browser tests (test/browser) will be skipped; set RUNWAY_CHROMIUM to a Chromium to run them",
    );
    return;
  }
  console.log("setup: installing chromium for the console's browser tests (apt-get install -y chromium)");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () => spawnSync("apt-get", ["install", "-y", "--no-install-recommends", "chromium"], { stdio: "inherit", env }).status === 0;
  if (install()) return;
  if (spawnSync("apt-get", ["update"], { stdio: "inherit", env }).status === 0 && install()) return;
  console.log("setup: chromium could not be installed: the console's browser tests will be skipped");
}
