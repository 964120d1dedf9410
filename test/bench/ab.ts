/**
 * `ab`: this checkout against another (`AB_BASE`, e.g. a `git worktree` of the commit before),
 * both in this one process, their rounds interleaved. On a machine whose speed swings by a third
 * within the hour, two bench runs minutes apart compare the hours as much as the code; here each
 * round of one side is next to a round of the other. Each side has its own server and node (the
 * other side's stay idle meanwhile), and its own copy of every project module (imported from its
 * own path; each copy's process settings applied alike); the packages in node_modules are shared.
 *
 * Per round: w1's workload (runs of 10 no-op steps, 32 in flight), one run of 10 with one in
 * flight, and w2's 200-wide map. Over the w1 part, the main thread's CPU a step and the side's
 * nats-server's: on a VM whose speed swings, a steadier measure of a change than the rate.
 * Reported per side as the median of the rounds, and the median of the rounds' ratios this / base.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { clockTicks, cpuMicrosEach, median, procCpuSeconds, progress, windowed } from "./stats.js";
import { sequential, startAndFinish, WIDE, type World } from "./workflow.js";

interface Side {
  name: "base" | "this";
  world: World;
  w1: number[];
  /** Main-thread CPU µs a step over each round's w1 part (node and client: this process). */
  mainCpu: number[];
  /** The side's nats-server, CPU µs a step over the same part. */
  serverCpu: number[];
  one: number[];
  w2: number[];
}

type WorkflowModule = typeof import("./workflow.js");

async function workflowOf(root: string): Promise<WorkflowModule> {
  return (await import(resolve(root, "test/bench/workflow.ts"))) as WorkflowModule;
}

type SpinModule = typeof import("../../cluster/event-loop-spin.js");

/**
 * The event-loop spin is a singleton of its module, and each side has its own copy: main.ts
 * applies the setting to this checkout's only, so the other side's is applied here the same way
 * (a checkout without the module has none). Otherwise one side spins and the other sleeps, and
 * the one-in-flight ratio measures that instead of the change.
 */
async function applySpinOf(root: string): Promise<void> {
  const file = resolve(root, "cluster/event-loop-spin.ts");
  if (!existsSync(file)) return;
  const spin = (await import(file)) as SpinModule;
  const setting = spin.EVENT_LOOP_SPIN.of(process.env);
  if (setting) spin.applyEventLoopSpin(setting);
}

const ITEMS = Array.from({ length: 200 }, (_, i) => i);

const TICKS = clockTicks();

async function round(side: Side, runs: number, measured: boolean): Promise<void> {
  const w = side.world;
  const main0 = procCpuSeconds(process.pid, TICKS, process.pid);
  const server0 = procCpuSeconds(w.server.pid, TICKS);
  const t0 = performance.now();
  await windowed(runs, 32, async () => void (await startAndFinish(w, "seq10")));
  const w1 = (runs * 10) / ((performance.now() - t0) / 1_000);
  const mainCpu = cpuMicrosEach(main0, procCpuSeconds(process.pid, TICKS, process.pid), runs * 10);
  const serverCpu = cpuMicrosEach(server0, procCpuSeconds(w.server.pid, TICKS), runs * 10);
  const one: number[] = [];
  for (let i = 0; i < 20; i++) one.push(await startAndFinish(w, "seq10"));
  const wide: number[] = [];
  for (let i = 0; i < 3; i++) wide.push(await startAndFinish(w, "wide", { items: ITEMS }));
  if (!measured) return;
  side.w1.push(Math.round(w1));
  if (mainCpu !== null) side.mainCpu.push(mainCpu);
  if (serverCpu !== null) side.serverCpu.push(serverCpu);
  side.one.push(median(one));
  side.w2.push(median(wide));
}

export async function ab(): Promise<Record<string, unknown>> {
  const base = process.env.AB_BASE;
  if (!base || !existsSync(resolve(base, "test/bench/workflow.ts")))
    throw new Error("ab: set AB_BASE to another checkout of this project (with node_modules), e.g. a git worktree of the commit before");
  const rounds = Number(process.env.AB_ROUNDS ?? 6);
  const runs = Number(process.env.AB_RUNS ?? 300);
  const sides: Side[] = [];
  for (const [name, root] of [
    ["base", base],
    ["this", fileURLToPath(new URL("../..", import.meta.url))],
  ] as const) {
    // The side's own world (its server, node and modules); the workload is this checkout's.
    const { world } = await workflowOf(root);
    await applySpinOf(root);
    const w = await world();
    await w.client.putDefinition(sequential("seq10", 10));
    await w.client.putDefinition(WIDE);
    sides.push({ name, world: w, w1: [], mainCpu: [], serverCpu: [], one: [], w2: [] });
  }
  try {
    progress(`ab: warm-up, then ${rounds} rounds of ${runs} runs × 10 steps (32 in flight), 20 runs one in flight, 3 maps of 200, each side in turn`);
    for (const side of sides) await round(side, runs, false);
    for (let r = 0; r < rounds; r++) {
      // Which side goes first alternates, so neither always follows the other's garbage.
      for (const side of r % 2 ? [...sides].reverse() : sides) await round(side, runs, true);
      progress(`ab: round ${r + 1}/${rounds}`);
    }
    const [b, t] = sides as [Side, Side];
    // The ratio of each round's pair (the same minutes of the machine), then their median.
    const figure = (of: (s: Side) => number[]) => ({
      base: median(of(b)),
      this: median(of(t)),
      ratio: Math.round(median(of(t).map((x, i) => x / of(b)[i]!)) * 1000) / 1000,
      rounds: { base: of(b), this: of(t) },
    });
    return {
      bench: "ab",
      base,
      rounds,
      runs_per_round: runs,
      w1_steps_per_s: figure((s) => s.w1),
      w1_main_thread_cpu_us_per_step: figure((s) => s.mainCpu),
      w1_nats_server_cpu_us_per_step: figure((s) => s.serverCpu),
      one_in_flight_run_of_10_ms: figure((s) => s.one),
      w2_200_wide_ms: figure((s) => s.w2),
    };
  } finally {
    for (const side of sides) await side.world.close();
  }
}
