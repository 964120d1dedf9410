/**
 * `abfresh`: this checkout against another (`AB_BASE`), each sample a fresh process running w1
 * (`W1_SETTLE=0`: the first and second windows and one in flight, no warm window), the two sides
 * alternated pair by pair (the order flips each pair, so a drift of the machine's speed favours
 * neither). `ab` runs both sides in one process and reports their warm rounds; w1's headlines are
 * its first two windows after a start, where V8 still compiles the hot path and the two cores,
 * not the main thread, are the bound: a change that saves nats-server or the compiler CPU shows
 * here and not in `ab`, and one that adds latency to a cold path shows here first.
 *
 * Per side the medians of w1's `steps_per_s` and `second_window_steps_per_s` (null against a base
 * without it), its main thread's, the process's and nats-server's CPU a step, and the one-in-flight
 * run of 10 p50; and the medians of the pairs' ratios this / base.
 * `AB_PAIRS` (default 6). Other variables (e.g. `RW_SYNC`, `W1_WARMUP`) reach both sides; unset,
 * `W1_WARMUP` is this side's default on both. `AB_NODE_FLAGS`: node's flags for both sides'
 * processes (V8's, e.g. the inlining budgets docs/tuning.md names), `AB_BASE_NODE_FLAGS` the
 * base's instead (empty: none; a base that sets V8's flags itself once started, or one whose step
 * pool passes V8's flags on to its threads, which refuse them).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { median, progress } from "./stats.js";
import { W1_WARMUP_RUNS } from "./workflow.js";

interface Sample {
  steps_per_s: number;
  /** The window after 280 runs; absent from a base older than it. */
  second_window_steps_per_s: number | undefined;
  main_thread: number;
  process: number;
  nats_server: number;
  one_in_flight_p50: number;
}

const FIELDS: (keyof Sample)[] = ["steps_per_s", "second_window_steps_per_s", "main_thread", "process", "nats_server", "one_in_flight_p50"];

/** One w1 run of the checkout at `root`, in a process of its own. */
function w1Of(root: string, side: "base" | "this"): Promise<Sample> {
  return new Promise((done, fail) => {
    const given = side === "base" ? (process.env.AB_BASE_NODE_FLAGS ?? process.env.AB_NODE_FLAGS) : process.env.AB_NODE_FLAGS;
    const flags = (given ?? "").split(/\s+/).filter(Boolean);
    const child = spawn(process.execPath, [...flags, "--import", "tsx", resolve(root, "test/bench/main.ts"), "w1"], {
      cwd: root,
      // Both sides warm as this one does by default, whatever the base's own default is.
      env: { ...process.env, W1_SETTLE: "0", W1_WARMUP: process.env.W1_WARMUP ?? String(W1_WARMUP_RUNS) },
      stdio: ["ignore", "pipe", "ignore"],
    });
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => (out += chunk));
    child.on("error", fail);
    child.on("exit", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (code !== 0 || !line) return fail(new Error(`w1 in ${root} exited ${code} without a result`));
      const r = JSON.parse(line) as {
        steps_per_s: number;
        second_window_steps_per_s?: number;
        cpu_us_per_step: { main_thread: number; process: number; nats_server: number };
        one_in_flight_run_of_10_ms: { p50: number };
      };
      done({
        steps_per_s: r.steps_per_s,
        second_window_steps_per_s: r.second_window_steps_per_s,
        main_thread: r.cpu_us_per_step.main_thread,
        process: r.cpu_us_per_step.process,
        nats_server: r.cpu_us_per_step.nats_server,
        one_in_flight_p50: r.one_in_flight_run_of_10_ms.p50,
      });
    });
  });
}

const isFigures = (xs: (number | undefined)[]): xs is number[] => xs.every((x) => typeof x === "number");

export async function abFresh(): Promise<Record<string, unknown>> {
  const base = process.env.AB_BASE;
  if (!base || !existsSync(resolve(base, "test/bench/main.ts"))) throw new Error("AB_BASE must name another checkout of this project (with node_modules)");
  const here = fileURLToPath(new URL("../..", import.meta.url));
  const pairs = Number(process.env.AB_PAIRS ?? 6);
  const sides: Record<"base" | "this", Sample[]> = { base: [], this: [] };
  for (let i = 0; i < pairs; i++) {
    const order: ("base" | "this")[] = i % 2 === 0 ? ["base", "this"] : ["this", "base"];
    for (const side of order) {
      progress(`abfresh pair ${i + 1}/${pairs}: ${side}`);
      sides[side].push(await w1Of(side === "base" ? base : here, side));
    }
  }
  const report = (field: keyof Sample) => {
    const b = sides.base.map((s) => s[field]);
    const t = sides.this.map((s) => s[field]);
    if (!isFigures(b) || !isFigures(t)) return null;
    return {
      base: median(b),
      this: median(t),
      ratio: Math.round(median(t.map((x, i) => x / b[i]!)) * 1000) / 1000,
      pairs: { base: b, this: t },
    };
  };
  return {
    bench: "abfresh",
    base,
    pairs,
    ...Object.fromEntries(
      FIELDS.map((f) => [
        f === "one_in_flight_p50" ? "one_in_flight_run_of_10_ms_p50" : `w1_${f}${f.endsWith("steps_per_s") ? "" : "_cpu_us_per_step"}`,
        report(f),
      ]),
    ),
  };
}
