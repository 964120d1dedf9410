import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Percentiles over recorded samples (milliseconds), rounded for a JSON line. */
/** The p50 of `samples`, as {@link percentiles} takes it. */
export const median = (samples: number[]): number => percentiles(samples).p50;

export function percentiles(samples: number[]): { p50: number; p95: number; p99: number; mean: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  return { p50: round(at(0.5)), p95: round(at(0.95)), p99: round(at(0.99)), mean: round(mean) };
}

/** Runs `task(i)` for i in [0, total) with at most `window` in flight. */
export async function windowed(total: number, window: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(window, total) }, async () => {
      while (next < total) await task(next++);
    }),
  );
}

/**
 * A full garbage collection, also when node was started without `--expose-gc` (`npm run bench`):
 * the flag set at run time exposes `gc` to contexts created after it.
 */
export function forceGc(): void {
  let gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) {
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  }
  gc();
}

/** Heap in use after a full collection, in MB. */
export function heapUsedMb(): number {
  forceGc();
  return process.memoryUsage().heapUsed / 1024 / 1024;
}

export function progress(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

/** utime + stime of a process (or, with `thread`, of one of its threads) in seconds, from /proc (Linux), or undefined elsewhere. */
export function procCpuSeconds(pid: number, ticks: number, thread?: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces) start at the closing parenthesis.
    const stat = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / ticks;
  } catch {
    return undefined;
  }
}

/** CPU seconds of each of `pid`'s threads by thread id (Node names them all `node`; the main thread's id is the pid). */
export function threadCpuSeconds(pid: number, ticks: number): Map<string, number> {
  const byThread = new Map<string, number>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const cpu = procCpuSeconds(pid, ticks, Number(tid));
      if (cpu !== undefined) byThread.set(tid, cpu);
    }
  } catch {
    // No /proc: nothing to report.
  }
  return byThread;
}

/** CPU microseconds per unit of work between two `procCpuSeconds` readings; null where /proc could not be read. */
export function cpuMicrosEach(before: number | undefined, after: number | undefined, count: number): number | null {
  return before === undefined || after === undefined ? null : Math.round(((after - before) * 1e6) / count);
}

/**
 * CPU spent from now on, read when the returned function is called: microseconds per item (of
 * `count`) of this process (every thread), its main thread, and the process `serverPid`.
 */
export function cpuWindow(serverPid: number, ticks: number): (count: number) => { process: number; main_thread: number | null; nats_server: number | null } {
  const cpu0 = process.cpuUsage();
  const main0 = procCpuSeconds(process.pid, ticks, process.pid);
  const server0 = procCpuSeconds(serverPid, ticks);
  return (count) => {
    const cpu = process.cpuUsage(cpu0);
    return {
      process: Math.round((cpu.user + cpu.system) / count),
      main_thread: cpuMicrosEach(main0, procCpuSeconds(process.pid, ticks, process.pid), count),
      nats_server: cpuMicrosEach(server0, procCpuSeconds(serverPid, ticks), count),
    };
  };
}

/** Busy and total CPU seconds of the whole machine (all cores), from /proc/stat (Linux). */
export function machineCpuSeconds(ticks: number): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    return { busy: (total - idle) / ticks, total: total / ticks };
  } catch {
    return undefined;
  }
}

export function clockTicks(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
}

/**
 * BENCH_V8_TRACE=1: V8 prints every collection, optimisation and deoptimisation on stdout from
 * the call until the returned stop (flags set at run time: `--trace-gc` on the command line is
 * refused by the pool's workers, and NODE_OPTIONS refuses it).
 */
export function v8Trace(): (() => void) | undefined {
  if (process.env.BENCH_V8_TRACE !== "1") return undefined;
  setFlagsFromString("--trace-gc --trace-opt --trace-deopt");
  return () => setFlagsFromString("--no-trace-gc --no-trace-opt --no-trace-deopt");
}

/** BENCH_CPU_PROFILE=<file>: a CPU profile of this process's main thread (the node and the client) from the call until the returned stop. */
export async function cpuProfile(): Promise<(() => Promise<void>) | undefined> {
  const file = process.env.BENCH_CPU_PROFILE;
  if (!file) return undefined;
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  const heap = process.env.BENCH_HEAP_PROFILE;
  // Every allocation sampled, also of objects already collected: where the phase's garbage comes from.
  if (heap)
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  await session.post("Profiler.start");
  return async () => {
    const { profile } = await session.post("Profiler.stop");
    writeFileSync(file, JSON.stringify(profile));
    if (heap) writeFileSync(heap, JSON.stringify((await session.post("HeapProfiler.stopSampling")).profile));
    session.disconnect();
  };
}
