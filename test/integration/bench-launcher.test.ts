// `npm run bench` (test/bench/run.mjs) runs test/bench/main.ts from one bundle of the sources,
// built as `runway`'s is (scripts/bundle.mjs), so a benchmark measures the code a node runs.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { repoRoot, spawnProcess } from "../harness/index.js";

it("test/bench/run.mjs runs the benchmarks from a bundle of the sources: an unknown name gets the usage and exit 2", async () => {
  const child = spawnProcess(process.execPath, [join(repoRoot, "test", "bench", "run.mjs"), "no-such-bench"], { cwd: repoRoot, env: {} });
  const exit = await child.exited;
  expect(exit.code, child.lines.join("\n")).toBe(2);
  expect(child.lines.join("\n")).toMatch(/usage: npm run bench -- <ab\|abfresh\|actor\|.*\|w1\|/);
  // From the bundle, not through tsx (which it says when the bundle did not build).
  expect(child.lines.join("\n")).not.toMatch(/running the sources through tsx/);
  const bundles = readdirSync(join(repoRoot, "node_modules", ".cache", "runway")).filter((f) => f.startsWith("bench-"));
  expect(bundles.some((f) => /^bench-[0-9a-f]+\.mjs$/.test(f))).toBe(true);
  expect(bundles.filter((f) => !/^bench-[0-9a-f]+\.mjs(\.map)?$/.test(f))).toEqual([]);
});
