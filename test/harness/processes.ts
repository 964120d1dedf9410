// Child processes started by tests, and the PID registry that guarantees none outlives the
// test process: killAll() for orderly teardown, plus a synchronous exit hook for the rest.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { waitFor } from "./wait.js";

// ---- registry --------------------------------------------------------------------------------

interface Registered {
  pid: number;
  name: string;
  /** Resolves when the process has exited (or is known to be gone). */
  exited: Promise<unknown>;
}

const live = new Map<number, Registered>();
const tempDirs = new Set<string>();
let hooksInstalled = false;

/** Track a spawned process until it exits. */
export function registerProcess(pid: number, name: string, exited: Promise<unknown>): void {
  installExitHooks();
  live.set(pid, { pid, name, exited });
  void exited.then(() => {
    if (live.get(pid)?.exited === exited) live.delete(pid);
  });
}

/** Temp dirs removed by the exit hook if nobody disposed of them. */
export function registerTempDir(dir: string): void {
  installExitHooks();
  tempDirs.add(dir);
}

export function unregisterTempDir(dir: string): void {
  tempDirs.delete(dir);
}

/** PIDs of registered processes that have not exited yet. */
export function livePids(): number[] {
  return [...live.keys()];
}

/** SIGKILL every registered process and wait until all have exited. SIGKILL also ends
 *  SIGSTOPped processes, so paused servers need no SIGCONT first. */
export async function killAll(): Promise<void> {
  const all = [...live.values()];
  for (const p of all) signal(p.pid, "SIGKILL");
  await Promise.all(all.map((p) => p.exited));
}

function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false; // already gone
  }
}

function killAllSync(): void {
  for (const pid of live.keys()) signal(pid, "SIGKILL");
  live.clear();
  if (process.env.RUNWAY_KEEP_TMP) return;
  for (const dir of tempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort at exit
    }
  }
  tempDirs.clear();
}

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", killAllSync);
  // A signal ends Node without running 'exit' handlers. Only take over a signal nobody else
  // handles (vitest/the bench may have their own), and re-raise it so the exit status stays.
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    if (process.listenerCount(sig) > 0) continue;
    process.once(sig, () => {
      killAllSync();
      process.kill(process.pid, sig);
    });
  }
}

// ---- SIGSTOP -----------------------------------------------------------------------------------

/** Thread states of a process from /proc ('T' = stopped), or undefined off Linux / when gone. */
function threadStates(pid: number): string[] | undefined {
  const dir = `/proc/${pid}/task`;
  if (!existsSync(dir)) return undefined;
  try {
    // the state follows the parenthesised command name, which may itself contain ") "
    return readdirSync(dir).map((t) => {
      const stat = readFileSync(`${dir}/${t}/stat`, "utf8");
      return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    });
  } catch {
    return undefined;
  }
}

/** SIGSTOP, then wait until every thread has actually stopped. kill() returns when the signal
 *  is queued; a busy multi-threaded process (nats-server under load) keeps running, and
 *  answering requests, for several milliseconds after that. */
export async function stopProcess(pid: number, timeoutMs = 5000): Promise<boolean> {
  if (!signal(pid, "SIGSTOP")) return false;
  if (threadStates(pid) === undefined) return true; // no /proc: best effort
  await waitFor(() => threadStates(pid)?.every((s) => s === "T" || s === "t") ?? true, {
    timeoutMs,
    intervalMs: 1,
    describe: `pid ${pid} to stop after SIGSTOP`,
  });
  return true;
}

export function continueProcess(pid: number): boolean {
  return signal(pid, "SIGCONT");
}

// ---- spawnProcess ------------------------------------------------------------------------------

export interface SpawnOptions {
  /** Added to (and overriding) the parent's environment. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Name used in error messages; defaults to the command's basename. */
  name?: string;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WaitForLineOptions {
  timeoutMs?: number;
  /** Only consider lines with index >= fromLine (default 0: lines already printed count). */
  fromLine?: number;
}

export interface ChildHandle {
  readonly pid: number;
  readonly name: string;
  /** All stdout and stderr lines captured so far, interleaved in arrival order. */
  readonly lines: string[];
  readonly exited: Promise<ExitInfo>;
  waitForLine(regex: RegExp, opts?: WaitForLineOptions): Promise<string>;
  /** Send `signal` (default SIGKILL) and wait for the exit. */
  kill(signal?: NodeJS.Signals): Promise<ExitInfo>;
  /** SIGSTOP; resolves once the process is really stopped. */
  pause(): Promise<void>;
  /** SIGCONT. */
  resume(): void;
  isRunning(): boolean;
}

export function spawnProcess(command: string, args: string[], opts: SpawnOptions = {}): ChildHandle {
  const name = opts.name ?? command.split("/").pop() ?? command;
  const child: ChildProcess = spawn(command, args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) {
    // spawn failures (ENOENT, EACCES) arrive as an 'error' event; surface them here instead
    child.on("error", () => {});
    throw new Error(`could not spawn ${name} (${command})`);
  }
  const pid = child.pid;
  const lines: string[] = [];
  const listeners = new Set<() => void>();
  let running = true;
  let paused = false;

  const exited = new Promise<ExitInfo>((resolve) => {
    child.once("exit", (code, sig) => {
      running = false;
      resolve({ code, signal: sig });
    });
    child.once("error", () => {
      running = false;
      resolve({ code: null, signal: null });
    });
  });
  // 'close' comes after the pipes are drained, i.e. after the last line was captured
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  registerProcess(pid, name, exited);

  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream, crlfDelay: Infinity }).on("line", (line) => {
      lines.push(line);
      for (const l of listeners) l();
    });
  }

  const tail = () => {
    const last = lines.slice(-20);
    return last.length ? `last ${last.length} lines:\n  ${last.join("\n  ")}` : "no output";
  };

  function waitForLine(regex: RegExp, { timeoutMs = 30_000, fromLine = 0 }: WaitForLineOptions = {}): Promise<string> {
    return new Promise((resolve, reject) => {
      let scanned = fromLine;
      let settled = false;
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        listeners.delete(check);
        clearTimeout(timer);
        fn();
      };
      const check = () => {
        for (; scanned < lines.length; scanned++) {
          const line = lines[scanned];
          if (line !== undefined && regex.test(line)) {
            finish(() => resolve(line));
            return;
          }
        }
      };
      const timer = setTimeout(
        () => finish(() => reject(new Error(`${name} (pid ${pid}): no line matching ${regex} within ${timeoutMs} ms; ${tail()}`))),
        timeoutMs,
      );
      listeners.add(check);
      check();
      // a process that exits cannot print the line any more; fail then, not at the timeout
      void exited.then(async (info) => {
        // let the last buffered lines arrive first (bounded: a grandchild may hold the pipes)
        let bound: NodeJS.Timeout | undefined;
        await Promise.race([closed, new Promise((r) => (bound = setTimeout(r, 1000)))]);
        clearTimeout(bound);
        check();
        finish(() => reject(new Error(`${name} (pid ${pid}) exited (code ${info.code}, signal ${info.signal}) without a line matching ${regex}; ${tail()}`)));
      });
    });
  }

  return {
    pid,
    name,
    lines,
    exited,
    waitForLine,
    async kill(sig: NodeJS.Signals = "SIGKILL") {
      if (running) {
        signal(pid, sig);
        // a stopped process only acts on a non-KILL signal once continued
        if (paused && sig !== "SIGKILL") signal(pid, "SIGCONT");
      }
      return exited;
    },
    async pause() {
      if (running) paused = await stopProcess(pid);
    },
    resume() {
      if (running && continueProcess(pid)) paused = false;
    },
    isRunning: () => running,
  };
}

/** Run a TypeScript file in a child Node with tsx, as the tests' workers do. */
export function spawnTsx(scriptPath: string, args: string[] = [], opts: SpawnOptions = {}): ChildHandle {
  return spawnProcess(process.execPath, ["--import", "tsx", scriptPath, ...args], { name: opts.name ?? scriptPath.split("/").pop(), ...opts });
}
