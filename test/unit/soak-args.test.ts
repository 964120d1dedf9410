import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const script = fileURLToPath(new URL("../soak/soak.ts", import.meta.url));
const soak = (...args: string[]) => spawnSync(process.execPath, ["--import", "tsx", script, ...args], { encoding: "utf8", timeout: 30_000 });

it.each([
  [["--minutes", "abc"], /--minutes must be a positive number/],
  [["--nodes", "0"], /--nodes must be a positive integer/],
  [["--servers", "2"], /--servers must be at least 3/],
  [["--seed", "1.5"], /--seed must be a positive integer/],
  [["--cycles", "two"], /--cycles must be a positive integer/],
  [["--partitions", "4"], /Unknown option '--partitions'[\s\S]*usage: npm run soak/],
])("npm run soak refuses bad flags %j with exit 2 and a sentence, before starting anything", (args, message) => {
  const r = soak(...args);
  expect(r.status).toBe(2);
  expect(r.stderr).toMatch(message);
  expect(r.stdout).toBe("");
});
