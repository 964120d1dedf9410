import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { describeHelpers, HELPER_NICE_STEP } from "../../cluster/helper-threads.js";

const module = fileURLToPath(new URL("../../cluster/helper-threads.ts", import.meta.url));

/**
 * Applies the setting in a process of its own (it changes the priority of the calling process's
 * threads), then starts a worker thread, and prints every thread's `nice` (field 19 of
 * /proc/self/task/<tid>/stat) and which thread is the worker.
 */
const PROBE = `
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { Worker } from "node:worker_threads";
const { applyHelperThreads } = await import(process.env.MODULE);
const applied = applyHelperThreads(process.env.SETTING);
const worker = new Worker("const { parentPort } = require('node:worker_threads'); const { readlinkSync } = require('node:fs'); parentPort.postMessage(Number(readlinkSync('/proc/thread-self').split('/').pop())); setInterval(() => {}, 1000);", { eval: true, execArgv: [] });
const workerTid = await new Promise((resolve) => worker.once("message", resolve));
const nice = (tid) => Number(readFileSync("/proc/self/task/" + tid + "/stat", "utf8").split(") ")[1].split(" ")[16]);
const threads = readdirSync("/proc/self/task").map(Number).map((tid) => ({ tid, nice: nice(tid), main: tid === process.pid, worker: tid === workerTid }));
process.stdout.write(JSON.stringify({ applied, threads }));
await worker.terminate();
`;

function probe(setting: string) {
  const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", PROBE], {
    env: { ...process.env, MODULE: module, SETTING: setting },
    encoding: "utf8",
  });
  return JSON.parse(out) as {
    applied: { setting: string; lowered: number; nice?: number };
    threads: { tid: number; nice: number; main: boolean; worker: boolean }[];
  };
}

describe("a node's helper threads (RUNWAY_HELPER_THREADS; how it is read: env-settings.test.ts)", () => {
  it("says what it did", () => {
    expect(describeHelpers({ setting: "normal", lowered: 0 })).toBe("normal");
    expect(describeHelpers({ setting: "low", lowered: 9, nice: 10 })).toBe("low (9 threads at nice 10)");
  });

  it.skipIf(!existsSync("/proc/self/task"))(
    "low: every thread the process had is ten steps of nice below the main thread; a thread made later keeps the main thread's",
    () => {
      const { applied, threads } = probe("low");
      const main = threads.find((t) => t.main)!;
      const worker = threads.find((t) => t.worker)!;
      const helpers = threads.filter((t) => !t.main && !t.worker);
      expect(applied.setting).toBe("low");
      expect(applied.nice).toBe(Math.min(19, main.nice + HELPER_NICE_STEP));
      expect(applied.lowered).toBeGreaterThan(0);
      // V8's platform threads exist from the process's start; the worker's was made after.
      expect(helpers.some((t) => t.nice === applied.nice)).toBe(true);
      expect(main.nice).toBeLessThan(applied.nice!);
      expect(worker.nice).toBe(main.nice);
    },
  );

  it.skipIf(!existsSync("/proc/self/task"))("normal: no thread is lowered", () => {
    const { applied, threads } = probe("normal");
    expect(applied).toEqual({ setting: "normal", lowered: 0 });
    const main = threads.find((t) => t.main)!;
    expect(threads.every((t) => t.nice === main.nice)).toBe(true);
  });
});
