import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spread } from "../../runtime/pool/balancer.js";
import { StepPool, type StepResult, type StepTask, type TaskRef } from "../../runtime/pool/pool.js";
import { eventLoopSpin, SPIN_OFF } from "../../runtime/index.js";
import { spawnTsx } from "../harness/index.js";

const HANDLERS = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));
const POOL = fileURLToPath(new URL("../../runtime/pool/pool.ts", import.meta.url));
const TERMINATE_WHILE_LOADING = fileURLToPath(new URL("../fixtures/terminate-while-loading.ts", import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), "runway-pool-"));

const events: string[] = [];
let pool: StepPool;
let seq = 0;

function task(handler: string, input: unknown = null, more: Partial<StepTask> = {}): StepTask {
  return { handler, input, runId: "run-1", stepId: `step-${++seq}`, attempt: 1, leaseEpoch: 7, timeoutMs: 5_000, ...more };
}

function failed(result: StepResult) {
  if (result.outcome !== "failed") throw new Error(`expected a failure, got ${JSON.stringify(result)}`);
  return result.error;
}

beforeAll(async () => {
  pool = new StepPool({
    handlerModules: [HANDLERS],
    threads: 2,
    onHeartbeat: (ref: TaskRef) => events.push(`heartbeat ${ref.stepId} ${ref.attempt} ${ref.leaseEpoch}`),
    onProgress: (ref: TaskRef, data: unknown) => events.push(`progress ${ref.stepId} ${JSON.stringify(data)}`),
  });
  await pool.start();
});

afterAll(async () => {
  await pool?.destroy();
  rmSync(tmp, { recursive: true, force: true });
});

describe("StepPool", () => {
  it("learns the handler names at start", () => {
    expect([...pool.handlerNames()]).toEqual(expect.arrayContaining(["noop", "echo", "add", "spin", "hog", "slow", "beat", "count_invocations"]));
  });

  it("returns outputs of succeeding handlers", async () => {
    expect(await pool.run(task("noop"))).toEqual({ outcome: "succeeded", output: null });
    expect(await pool.run(task("echo", { a: [1, "x", { b: null }], shared: { s: 1 } }))).toEqual({
      outcome: "succeeded",
      output: { a: [1, "x", { b: null }], shared: { s: 1 } },
    });
    expect(await pool.run(task("add", { a: 2, b: 40 }))).toEqual({ outcome: "succeeded", output: 42 });
  });

  it("classifies handler failures: handler_error, terminal, retryable", async () => {
    expect(failed(await pool.run(task("throws")))).toEqual({ code: "handler_error", message: "TypeError: plain bug", retryable: true });
    expect(failed(await pool.run(task("fail_terminal")))).toEqual({ code: "terminal", message: "this input can never work", retryable: false });
    expect(failed(await pool.run(task("fail_retryable")))).toEqual({ code: "retryable", message: "dependency unavailable", retryable: true });
  });

  it("41 fails late_start without calling the handler once its start deadline passed; starts it before", async () => {
    const ledger = join(tmp, "late-start.txt");
    const late = await pool.run(task("count_invocations", { file: ledger, value: 1 }, { startBy: Date.now() - 1 }));
    expect(failed(late)).toMatchObject({ code: "late_start", retryable: true });
    const timely = await pool.run(task("count_invocations", { file: ledger, value: 2 }, { startBy: Date.now() + 60_000 }));
    expect(timely).toEqual({ outcome: "succeeded", output: 2 });
    // Only the timely one ran.
    expect(readFileSync(ledger, "utf8").trim().split("\n")).toHaveLength(1);
  });

  it("answers unknown_handler without running anything", async () => {
    expect(failed(await pool.run(task("no_such_handler")))).toMatchObject({ code: "unknown_handler", retryable: false });
  });

  it("refuses output that is not JSON data: functions, cycles, BigInt", async () => {
    expect(failed(await pool.run(task("bad_output")))).toMatchObject({ code: "bad_output", retryable: false, message: expect.stringContaining("function") });
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(failed(await pool.run(task("echo", cyclic)))).toMatchObject({ code: "bad_output", message: expect.stringContaining("output.self") });
    expect(failed(await pool.run(task("echo", { n: 10n })))).toMatchObject({ code: "bad_output", message: expect.stringContaining("bigint") });
    expect(failed(await pool.run(task("echo", { d: new Date(0) })))).toMatchObject({ code: "bad_output", message: expect.stringContaining("Date") });
  });

  it("times out a CPU-spinning handler by terminating its thread, and keeps working", async () => {
    const t0 = performance.now();
    const before = pool.stats().terminations;
    const error = failed(await pool.run(task("spin", null, { timeoutMs: 200 })));
    expect(error).toMatchObject({ code: "timeout", retryable: true });
    expect(performance.now() - t0).toBeLessThan(3_000);
    expect(pool.stats().terminations).toBe(before + 1);
    // both threads (one of them the replacement) still run work
    const [a, b] = await Promise.all([pool.run(task("slow", { ms: 50 })), pool.run(task("slow", { ms: 50 }))]);
    expect(a).toEqual({ outcome: "succeeded", output: "slept" });
    expect(b).toEqual({ outcome: "succeeded", output: "slept" });
  });

  it("stops a spinning step that waited in Piscina's queue while its thread was replaced (its thread is learnt when it is placed)", async () => {
    const lone = new StepPool({ handlerModules: [HANDLERS], threads: 1, cancelGraceMs: 0 });
    await lone.start();
    try {
      expect(failed(await lone.run(task("spin", null, { timeoutMs: 200 })))).toMatchObject({ code: "timeout" });
      // The replacement thread is still loading the handlers: this step waits for it inside Piscina.
      expect(failed(await lone.run(task("spin", null, { timeoutMs: 200 })))).toMatchObject({ code: "timeout" });
      expect(lone.stats().terminations).toBe(2);
      // Its time runs out before the replacement can take it: its thread is terminated once it is placed.
      expect(failed(await lone.run(task("spin", null, { timeoutMs: 1 })))).toMatchObject({ code: "timeout" });
      expect(lone.stats().terminations).toBe(3);
      expect(await lone.run(task("noop"))).toMatchObject({ outcome: "succeeded" });
    } finally {
      await lone.destroy();
    }
  });

  it("aborts ctx.signal on timeout so a cooperative handler stops without losing its thread", async () => {
    const before = pool.stats().terminations;
    expect(failed(await pool.run(task("slow", { ms: 10_000 }, { timeoutMs: 100 })))).toMatchObject({ code: "timeout" });
    expect(pool.stats().terminations).toBe(before); // settled inside the grace period
  });

  it("fails a memory hog with resource_exhausted and survives it", async () => {
    const small = new StepPool({ handlerModules: [HANDLERS], threads: 1, maxOldGenerationSizeMb: 32 });
    await small.start();
    try {
      expect(failed(await small.run(task("hog", null, { timeoutMs: 60_000 })))).toMatchObject({ code: "resource_exhausted", retryable: false });
      expect(await small.run(task("add", { a: 1, b: 1 }))).toEqual({ outcome: "succeeded", output: 2 });
      expect(small.stats()).toMatchObject({ completed: 1, failed: 1, crashes: 1 });
    } finally {
      await small.destroy();
    }
    expect(await pool.run(task("noop"))).toMatchObject({ outcome: "succeeded" });
  });

  it("reports a thread that dies under a task as worker_crashed", async () => {
    expect(failed(await pool.run(task("crash")))).toMatchObject({ code: "worker_crashed", retryable: true });
    expect(await pool.run(task("noop"))).toMatchObject({ outcome: "succeeded" });
  });

  it("delivers heartbeat and progress while the handler runs, before run() resolves", async () => {
    events.length = 0;
    const t = task("beat");
    const result = await pool.run(t);
    events.push("resolved");
    expect(result).toEqual({ outcome: "succeeded", output: "done" });
    expect(events).toEqual([...[0, 1, 2].flatMap((i) => [`heartbeat ${t.stepId} 1 7`, `progress ${t.stepId} {"i":${i}}`]), "resolved"]);
  });

  it("aborts: before start, while queued, while running", async () => {
    expect(failed(await pool.run(task("noop"), { signal: AbortSignal.abort() }))).toMatchObject({ code: "aborted", retryable: false });

    const running = new AbortController();
    const queued = new AbortController();
    const busy = [pool.run(task("slow", { ms: 300 })), pool.run(task("slow", { ms: 10_000 }), { signal: running.signal })];
    const waiting = pool.run(task("noop"), { signal: queued.signal });
    await new Promise((r) => setTimeout(r, 50));
    expect(pool.stats()).toMatchObject({ running: 2, queued: 1 });
    queued.abort();
    expect(failed(await waiting)).toMatchObject({ code: "aborted", retryable: false });
    expect(pool.stats()).toMatchObject({ running: 2, queued: 0 });
    running.abort();
    expect(failed(await busy[1]!)).toMatchObject({ code: "aborted", retryable: false });
    expect(await busy[0]).toEqual({ outcome: "succeeded", output: "slept" });

    // a handler that ignores its signal is stopped by terminating its thread
    const spinAbort = new AbortController();
    const spinning = pool.run(task("spin", null, { timeoutMs: 60_000 }), { signal: spinAbort.signal });
    setTimeout(() => spinAbort.abort(), 50);
    expect(failed(await spinning)).toMatchObject({ code: "aborted" });
    expect(await pool.run(task("noop"))).toMatchObject({ outcome: "succeeded" });
  });

  it("stops through the function `cancellable` hands over: while queued, while running, and a handler that ignores its signal", async () => {
    let cancelRunning: () => void = () => undefined;
    let cancelQueued: () => void = () => undefined;
    const busy = [pool.run(task("slow", { ms: 300 })), pool.run(task("slow", { ms: 10_000 }), { cancellable: (c) => (cancelRunning = c) })];
    const waiting = pool.run(task("noop"), { cancellable: (c) => (cancelQueued = c) });
    await new Promise((r) => setTimeout(r, 50));
    expect(pool.stats()).toMatchObject({ running: 2, queued: 1 });
    cancelQueued();
    expect(failed(await waiting)).toMatchObject({ code: "aborted", retryable: false });
    cancelRunning();
    expect(failed(await busy[1]!)).toMatchObject({ code: "aborted", retryable: false });
    expect(await busy[0]).toEqual({ outcome: "succeeded", output: "slept" });

    let cancelSpin: () => void = () => undefined;
    const spinning = pool.run(task("spin", null, { timeoutMs: 60_000 }), { cancellable: (c) => (cancelSpin = c) });
    setTimeout(() => cancelSpin(), 50);
    expect(failed(await spinning)).toMatchObject({ code: "aborted" });
    expect(await pool.run(task("noop"))).toMatchObject({ outcome: "succeeded" });
  });

  it("a step whose caller stopped it before handing it over never runs, and the pool's counts stay true (soak: a cancelled map's items ran after the cancel)", async () => {
    const ledger = join(tmp, "stopped-first.txt");
    const stopped = await pool.run(task("count_invocations", { file: ledger, value: 1 }), { cancellable: (cancel) => cancel() });
    expect(failed(stopped)).toMatchObject({ code: "aborted", retryable: false });
    expect(await pool.run(task("count_invocations", { file: ledger, value: 2 }))).toEqual({ outcome: "succeeded", output: 2 });
    expect(readFileSync(ledger, "utf8").trim().split("\n")).toHaveLength(1);
    expect(pool.stats()).toMatchObject({ running: 0, queued: 0 });
  });

  it("passes run, step, attempt to the handler (count_invocations)", async () => {
    const file = join(tmp, "invocations.txt");
    const t = task("count_invocations", { file, value: { ok: true } }, { attempt: 3 });
    expect(await pool.run(t)).toEqual({ outcome: "succeeded", output: { ok: true } });
    expect(readFileSync(file, "utf8")).toBe(`run-1 ${t.stepId} 3\n`);
  });

  it("runs 1,000 no-op tasks (throughput and per-task overhead)", async () => {
    const n = 1_000;
    await Promise.all(Array.from({ length: 50 }, () => pool.run(task("noop")))); // warm
    let t0 = performance.now();
    const results = await Promise.all(Array.from({ length: n }, () => pool.run(task("noop"))));
    const parallelMs = performance.now() - t0;
    expect(results.every((r) => r.outcome === "succeeded")).toBe(true);

    t0 = performance.now();
    for (let i = 0; i < n; i++) await pool.run(task("noop"));
    const sequentialMs = performance.now() - t0;
    console.log(
      `StepPool noop x${n}, 2 threads: ${Math.round((n / parallelMs) * 1000)} tasks/s all at once ` +
        `(${((parallelMs * 1000) / n).toFixed(1)} µs/task); sequential round trip ${((sequentialMs * 1000) / n).toFixed(1)} µs`,
    );
    // target is well under 0.2 ms (about 0.04 ms under node --import tsx); the bound leaves room
    // for a loaded 2-core machine while still catching per-task imports or thread spawns
    expect(parallelMs / n).toBeLessThan(0.5);
  });

  it("runs threads × tasksPerThread handlers at once; a terminated thread takes its other tasks down (worker_crashed, retryable)", async () => {
    const wide = new StepPool({ handlerModules: [HANDLERS], threads: 1, tasksPerThread: 3 });
    await wide.start();
    try {
      const runs = [1, 2, 3, 4].map(() => wide.run(task("slow", { ms: 300 })));
      expect(wide.stats()).toMatchObject({ running: 3, queued: 1 });
      expect((await Promise.all(runs)).map((r) => r.outcome)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"]);
      // Three steps that each wait for the other two can only finish if they share the thread.
      const met = await Promise.all([1, 2, 3].map(() => wide.run(task("barrier", { key: "b", n: 3 }, { timeoutMs: 10_000 }))));
      expect(met).toEqual([1, 2, 3].map(() => ({ outcome: "succeeded", output: 3 })));
      // A spinning step past its timeout has its thread terminated; its thread-mate goes with it.
      const neighbour = wide.run(task("slow", { ms: 5_000 }));
      expect(failed(await wide.run(task("spin", null, { timeoutMs: 200 })))).toMatchObject({ code: "timeout" });
      expect(failed(await neighbour)).toMatchObject({ code: "worker_crashed", retryable: true });
      expect(wide.stats().terminations).toBe(1);
      expect(await wide.run(task("noop"))).toMatchObject({ outcome: "succeeded" });
    } finally {
      await wide.destroy();
    }
  });

  it("sends the steps that got a slot in one turn as one batch a thread, and answers a step that ends before its batch-mates at once", async () => {
    const batching = new StepPool({ handlerModules: [HANDLERS], threads: 2, tasksPerThread: 8 });
    await batching.start();
    try {
      const cancels: (() => void)[] = [];
      const long = () => batching.run(task("slow", { ms: 60_000 }, { timeoutMs: 120_000 }), { cancellable: (c) => cancels.push(c) });
      // An idle pool sends its first step at once; the fifteen given in the same turn after it
      // go at the turn's end, spread over the two threads: two more messages, not fifteen.
      const first = long();
      const noops = Array.from({ length: 14 }, () => batching.run(task("noop")));
      const slowMate = long();
      let slowEnded = false;
      void Promise.all([first, slowMate]).then(() => (slowEnded = true));
      // Every no-op is answered while the slow steps, one of them in a no-op's batch, still run.
      expect((await Promise.all(noops)).every((r) => r.outcome === "succeeded")).toBe(true);
      expect(slowEnded).toBe(false);
      expect(batching.stats()).toMatchObject({ batches: 3, running: 2 });
      for (const cancel of cancels) cancel();
      expect((await Promise.all([first, slowMate])).map((r) => failed(r).code)).toEqual(["aborted", "aborted"]);
    } finally {
      await batching.destroy();
    }
  });

  it("a step stopped in the turn it got its slot never reaches a thread", async () => {
    const file = join(tmp, "never-sent.txt");
    let stopSlow = () => {};
    // The pool is busy, so the next step waits for the turn's end to be sent: it is stopped before.
    const slow = pool.run(task("slow", { ms: 60_000 }, { timeoutMs: 120_000 }), { cancellable: (c) => (stopSlow = c) });
    let stop = () => {};
    const stopped = pool.run(task("count_invocations", { file }), { cancellable: (c) => (stop = c) });
    stop();
    expect(failed(await stopped)).toEqual({ code: "aborted", message: "step was cancelled", retryable: false });
    stopSlow();
    expect(failed(await slow).code).toBe("aborted");
    expect(await pool.run(task("noop"))).toMatchObject({ outcome: "succeeded" });
    expect(() => readFileSync(file, "utf8")).toThrow();
  });

  it("has the event loop poll for the answers of short steps, and wait parked for those of steps that run long", async () => {
    const before = eventLoopSpin.sources;
    // A pool of its own: no thread of it is being replaced after an earlier test.
    const own = new StepPool({ handlerModules: [HANDLERS], threads: 1 });
    expect(eventLoopSpin.sources).toBe(before + 1);
    // "Soon" wider than any busy machine needs for these steps. Each sleeps 30 ms on its thread, so
    // the loop's first polling turn comes before the answer (a step of 2 ms could answer while the
    // loop was off its core, before any turn: 1 run in 8 alone, more beside other tests).
    eventLoopSpin.configure({ windowMs: 10_000, soonMs: 10_000, maxOutstanding: 4 });
    try {
      await own.start();
      await own.run(task("slow", { ms: 30 }));
      let turns = eventLoopSpin.turns;
      await own.run(task("slow", { ms: 30 }));
      expect(eventLoopSpin.turns).toBeGreaterThan(turns);
      // A step of 100 ms answers no sooner than 100 ms, later than this "soon": the next is waited for parked.
      eventLoopSpin.configure({ windowMs: 50, soonMs: 50, maxOutstanding: 4 });
      await own.run(task("slow", { ms: 100 }));
      turns = eventLoopSpin.turns;
      await own.run(task("slow", { ms: 100 }));
      expect(eventLoopSpin.turns).toBe(turns);
    } finally {
      eventLoopSpin.configure(SPIN_OFF);
      await own.destroy();
    }
    // A destroyed pool no longer counts its steps for the spin.
    expect(eventLoopSpin.sources).toBe(before);
  });

  it("runs a task given while its threads still load, once they have named the handlers", async () => {
    const early = new StepPool({ handlerModules: [HANDLERS], threads: 1 });
    const starting = early.start();
    try {
      // Before the threads answered no handler is known here: the tasks wait instead of failing unknown_handler.
      expect(early.handlerNames().size).toBe(0);
      const results = Promise.all([early.run(task("add", { a: 1, b: 2 })), early.run(task("noop"))]);
      await starting;
      expect(await results).toEqual([
        { outcome: "succeeded", output: 3 },
        { outcome: "succeeded", output: null },
      ]);
    } finally {
      await early.destroy();
    }
  });

  it("answers a task given while its threads load worker_crashed when they fail to load, and start() rejects", async () => {
    const bad = join(tmp, "no-handlers-early.mjs");
    writeFileSync(bad, "export const something = 1;\n");
    const p = new StepPool({ handlerModules: [bad] });
    const starting = p.start();
    const result = p.run(task("noop"));
    await expect(starting).rejects.toThrow(/no `handlers` export/);
    expect(failed(await result)).toMatchObject({ code: "worker_crashed", retryable: true });
    await p.destroy();
  });

  it("fails start() clearly on a module without a handlers export", async () => {
    const bad = join(tmp, "no-handlers.mjs");
    writeFileSync(bad, "export const something = 1;\n");
    const p = new StepPool({ handlerModules: [bad] });
    await expect(p.start()).rejects.toThrow(/no `handlers` export/);
    await p.destroy();
  });

  it("its threads run with require() of ES modules off, so that a thread terminated while it loads the worker file never aborts the node", async () => {
    // Node before 20.17 has neither require(esm) nor the flag.
    const off = process.allowedNodeEnvironmentFlags.has("--experimental-require-module") ? ["--no-experimental-require-module"] : [];
    expect(await pool.run(task("exec_argv"))).toMatchObject({ outcome: "succeeded", output: expect.arrayContaining(off) });
    // Node aborts a process whose thread is terminated while require() links an ES module (CI
    // saw it when a pool was destroyed while its threads loaded). A module this wide to link
    // made that happen within ~2 s (about 6 pools) in 6 tries of 6 without the flag.
    const wide = join(tmp, "wide-to-link.mjs");
    writeFileSync(wide, `${Array.from({ length: 15_000 }, (_, i) => `export const v${i} = ${i};`).join("\n")}\nexport default () => 1;\n`);
    const child = spawnTsx(TERMINATE_WHILE_LOADING, [wide, "24"], { name: "terminate-while-loading" });
    const exit = await child.exited;
    const out = child.lines.join("\n");
    expect(exit, out).toMatchObject({ code: 0 });
    expect(Number(/survived (\d+) pools/.exec(out)?.[1])).toBe(24);
  });

  it("works in a child process run with node --import tsx", async () => {
    const script = join(tmp, "child.mts");
    writeFileSync(
      script,
      `import { StepPool } from ${JSON.stringify(POOL)};
const pool = new StepPool({ handlerModules: [${JSON.stringify(HANDLERS)}], onProgress: (_r, d) => console.log("progress " + JSON.stringify(d)) });
await pool.start();
const base = { runId: "r", stepId: "s", attempt: 1, leaseEpoch: 1, timeoutMs: 5000 };
console.log("add " + JSON.stringify(await pool.run({ ...base, handler: "add", input: { a: 20, b: 22 } })));
console.log("beat " + JSON.stringify(await pool.run({ ...base, handler: "beat", input: null })));
console.log("spin " + JSON.stringify(await pool.run({ ...base, handler: "spin", input: null, timeoutMs: 100 })));
console.log("terminal " + JSON.stringify(await pool.run({ ...base, handler: "fail_terminal", input: null })));
await pool.destroy();
console.log("exit");
`,
    );
    const child = spawnTsx(script, [], { name: "pool-child" });
    const exit = await child.exited;
    const out = child.lines.join("\n");
    expect(exit, out).toMatchObject({ code: 0 });
    expect(out).toContain('add {"outcome":"succeeded","output":42}');
    expect(out).toContain('progress {"i":2}');
    expect(out).toContain('beat {"outcome":"succeeded","output":"done"}');
    expect(out).toContain('spin {"outcome":"failed","error":{"code":"timeout"');
    expect(out).toContain('terminal {"outcome":"failed","error":{"code":"terminal"');
    expect(out).toContain("exit");
  });
});

describe("spread (which thread takes how many of a turn's steps)", () => {
  const loads = (m: Record<number, number>) => (t: number) => m[t] ?? 0;
  it("gives each step to the least loaded thread with room", () => {
    expect([...spread(5, [1, 2], loads({ 1: 3 }), 4)]).toEqual([
      [2, 4],
      [1, 1],
    ]);
    expect([...spread(4, [1, 2], loads({}), 8)]).toEqual([
      [1, 2],
      [2, 2],
    ]);
  });
  it("leaves over what no thread has room for", () => {
    expect([...spread(3, [1, 2], loads({ 1: 4, 2: 3 }), 4)]).toEqual([[2, 1]]);
    expect(spread(2, [], loads({}), 4).size).toBe(0);
  });
});
