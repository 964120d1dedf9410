// The `runway` command as a process: bin/runway.mjs runs the CLI in its own process, so a signal
// to it reaches the node; under npm, a node whose npm was SIGKILLed drains and exits instead of
// serving on as an orphan. Real processes, a real nats-server, the node's liveness record.
import { existsSync, readdirSync, readFileSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NODES_BUCKET } from "../../runtime/topology.js";
import { repoRoot, RUNWAY_USER, spawnProcess, startServer, waitFor, type ChildHandle, type NatsServerHandle } from "../harness/index.js";

const BIN = fileURLToPath(new URL("../../bin/runway.mjs", import.meta.url));
// npm sets its own npm_lifecycle_event for its script; the direct spawns must not inherit the
// one of an `npm test` around vitest. No update check: the tests ask no registry anything.
// The nodes run under the small-host profile whatever the machine: the tests below check its tunings.
const ENV = { npm_lifecycle_event: undefined, npm_config_update_notifier: "false", RUNWAY_PROFILE: "small-host" };

let server: NatsServerHandle;
let nc: NatsConnection;
/** Node processes the tests found, killed at the end if a failed test left one behind. */
const nodePids = new Set<number>();

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
});
afterAll(async () => {
  for (const pid of nodePids) if (running(pid)) process.kill(pid, "SIGKILL");
  await nc?.close();
  await server?.dispose();
});

function nodeArgs(name: string): string[] {
  return ["node", "--name", name, "--servers", server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--threads", "1"];
}

/** The node's liveness record in `rw_nodes`, or undefined once it is gone. */
async function liveness(name: string): Promise<{ pid: number } | undefined> {
  const entry = await (await new Kvm(nc).open(NODES_BUCKET)).get(`node.${name}`);
  return entry && entry.operation === "PUT" ? entry.json<{ pid: number }>() : undefined;
}

/** Whether `pid` is a live process (an exited one nobody has reaped yet, state Z, is not). */
function running(pid: number): boolean {
  const stat = `/proc/${pid}/stat`;
  if (!existsSync("/proc/self/stat")) {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
  try {
    const text = readFileSync(stat, "utf8");
    return text.slice(text.lastIndexOf(")") + 2, text.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** Starts `runway node` through `command`, waits for READY, and answers the node's pid from its liveness record. */
async function startNode(
  command: string,
  args: string[],
  name: string,
  env: Record<string, string | undefined> = {},
): Promise<{ child: ChildHandle; pid: number }> {
  const child = spawnProcess(command, [...args, ...nodeArgs(name)], { cwd: repoRoot, env: { ...ENV, ...env }, name: `${command.split("/").pop()} ${name}` });
  await child.waitForLine(new RegExp(`^READY ${name}$`), { timeoutMs: 60_000 });
  const record = await waitFor(() => liveness(name), { timeoutMs: 10_000, describe: `the liveness record of ${name}` });
  nodePids.add(record.pid);
  return { child, pid: record.pid };
}

/** The node drained (logged `stopped` for `reason`), its liveness record is deleted and its process is gone. */
async function drained(child: ChildHandle, name: string, pid: number, reason: string): Promise<void> {
  const stopped = new RegExp(`"msg":"stopped","reason":"${reason}"`);
  // Not waitForLine: after npm is gone the lines still come, from the node holding the pipes.
  await waitFor(() => child.lines.some((l) => stopped.test(l)), { timeoutMs: 20_000, describe: `${name} (pid ${pid}) to log "stopped" for ${reason}` });
  await waitFor(async () => !running(pid) && (await liveness(name)) === undefined, {
    timeoutMs: 20_000,
    describe: `${name} (pid ${pid}) to exit and its liveness record to go`,
  });
}

it("./bin/runway.mjs --help and npm run runway -- help print the usage and exit 0, with no server", async () => {
  for (const [command, args] of [
    [BIN, ["--help"]],
    ["npm", ["run", "--silent", "runway", "--", "help"]],
  ] as const) {
    const child = spawnProcess(command, [...args], { cwd: repoRoot, env: ENV });
    const exit = await child.exited;
    expect(exit.code, child.lines.join("\n")).toBe(0);
    expect(child.lines.join("\n")).toMatch(/^usage: runway <command>/m);
    expect(child.lines.join("\n")).toMatch(/tenant create <id>/);
  }
});

it.each([
  ["RUNWAY_HELPER_THREADS", "neither low nor normal", "lowest", /RUNWAY_HELPER_THREADS: "low" or "normal", not "lowest"/],
  ["RUNWAY_EVENT_LOOP_SPIN", "neither on nor off", "1ms", /RUNWAY_EVENT_LOOP_SPIN: "on" or "off", not "1ms"/],
  ["RUNWAY_PROFILE", "no profile", "tiny", /RUNWAY_PROFILE: "auto" or "small-host" or "standard", not "tiny"/],
])("./bin/runway.mjs node with %s %s refuses to start: exit 2, and it says why", async (variable, _which, value, says) => {
  const child = spawnProcess(BIN, nodeArgs(`${variable.toLowerCase()}-typo`), { cwd: repoRoot, env: { ...ENV, [variable]: value } });
  const exit = await child.exited;
  expect(exit.code, child.lines.join("\n")).toBe(2);
  expect(child.lines.join("\n")).toMatch(says);
  expect(child.lines.join("\n")).not.toMatch(/^READY /m);
});

it("./bin/runway.mjs runs a bundle of the sources as they are now: after a source changes, four started at once each make or take the new one and run, and no half-written file is left", async () => {
  // A new mtime is a new state of the sources (the bundle is named by path, size and mtime).
  const source = join(repoRoot, "cluster", "cli.ts");
  const now = new Date();
  utimesSync(source, now, now);
  const children = Array.from({ length: 4 }, () => spawnProcess(BIN, ["--help"], { cwd: repoRoot, env: ENV }));
  for (const child of children) {
    const exit = await child.exited;
    expect(exit.code, child.lines.join("\n")).toBe(0);
    expect(child.lines.join("\n")).toMatch(/^usage: runway <command>/m);
    // Run from the bundle, not through tsx (which it says when the bundle did not build).
    expect(child.lines.join("\n")).not.toMatch(/running the sources through tsx/);
  }
  const cache = join(repoRoot, "node_modules", ".cache", "runway");
  const files = readdirSync(cache).filter((f) => f.startsWith("cli-"));
  expect(files.filter((f) => !/^cli-[0-9a-f]+\.mjs(\.map)?$/.test(f))).toEqual([]);
  expect(files.length).toBeGreaterThanOrEqual(2);
  // The bundle made now has its source map beside it (stack traces name the .ts sources), without the sources' text.
  const made = files.filter((f) => f.endsWith(".mjs") && statSync(join(cache, f)).mtimeMs >= now.getTime() - 1_000);
  expect(made.length).toBeGreaterThanOrEqual(1);
  for (const bundle of made) {
    expect(files).toContain(`${bundle}.map`);
    expect(readFileSync(join(cache, bundle), "utf8")).toContain(`//# sourceMappingURL=${bundle}.map`);
    const map = JSON.parse(readFileSync(join(cache, `${bundle}.map`), "utf8")) as { sources: string[]; sourcesContent?: unknown };
    expect(map.sources).toContain("../../../cluster/cli.ts");
    expect(map.sourcesContent).toBeUndefined();
  }
});

it("./bin/runway.mjs node is the node itself: SIGTERM to it drains the node, deletes its liveness record and exits 0", async () => {
  const { child, pid } = await startNode(BIN, [], "bin-node");
  expect(pid).toBe(child.pid);
  // Its event loop polls for answers it expects soon (RUNWAY_EVENT_LOOP_SPIN unset), and its ready line says so.
  expect(child.lines.join("\n")).toMatch(/"msg":"node ready".*"event_loop_spin":"on \(answers expected within 0.25 ms/);
  // V8 keeps the flags node was given (none here): a node sets none itself, and its ready line says so.
  expect(child.lines.join("\n")).toMatch(/"msg":"node ready".*"node_flags":"none"/);
  const exit = await child.kill("SIGTERM");
  expect(exit, child.lines.join("\n")).toEqual({ code: 0, signal: null });
  await drained(child, "bin-node", pid, "SIGTERM");
});

it.skipIf(!existsSync("/proc/self/task"))(
  "./bin/runway.mjs node runs V8's helper threads ten steps of nice below its event loop, and its step pool's threads at the event loop's; its ready line says so",
  async () => {
    const { child, pid } = await startNode(BIN, [], "nice-node");
    const nice = (tid: string) => Number(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8").split(") ")[1]!.split(" ")[16]);
    const threads = readdirSync(`/proc/${pid}/task`).map((tid) => ({ tid: Number(tid), nice: nice(tid) }));
    const main = threads.find((t) => t.tid === pid)!;
    const lowered = Math.min(19, main.nice + 10);
    // V8's compiler and GC threads (four in Node 20), and at least the pool's one thread as high as the event loop.
    expect(threads.filter((t) => t.nice === lowered).length, JSON.stringify(threads)).toBeGreaterThanOrEqual(4);
    expect(threads.filter((t) => t.tid !== pid && t.nice === main.nice).length, JSON.stringify(threads)).toBeGreaterThanOrEqual(1);
    expect(child.lines.join("\n")).toMatch(new RegExp(`"msg":"node ready".*"helper_threads":"low \\(\\d+ threads at nice ${lowered}\\)"`));
    const exit = await child.kill("SIGTERM");
    expect(exit, child.lines.join("\n")).toEqual({ code: 0, signal: null });
  },
);

it("./bin/runway.mjs node under the standard profile keeps its helper threads' priority, and V8 the flags node was started with; its ready line says so", async () => {
  const flag = "--max-inlined-bytecode-size=300";
  const { child, pid } = await startNode(process.execPath, [flag, BIN], "standard-node", { RUNWAY_PROFILE: "standard" });
  expect(child.lines.join("\n")).toMatch(new RegExp(`"msg":"node ready".*"node_flags":"${flag}".*"helper_threads":"normal"`));
  const exit = await child.kill("SIGTERM");
  expect(exit, child.lines.join("\n")).toEqual({ code: 0, signal: null });
  await drained(child, "standard-node", pid, "SIGTERM");
});

it("SIGTERM while the node is still starting is not lost to the signal's default action: the node drains once it is up and exits 0", async () => {
  const child = spawnProcess(BIN, nodeArgs("early-term-node"), { cwd: repoRoot, env: ENV, name: "runway early-term-node" });
  // Its liveness record is written during the start, before READY: the signal lands mid-start or just after.
  const record = await waitFor(() => liveness("early-term-node"), { timeoutMs: 60_000, describe: "the liveness record of early-term-node" });
  nodePids.add(record.pid);
  const exit = await child.kill("SIGTERM");
  expect(exit, child.lines.join("\n")).toEqual({ code: 0, signal: null });
  await drained(child, "early-term-node", record.pid, "SIGTERM");
});

it("SIGTERM to npm run runway -- node reaches the node: it drains, and npm exits 0 after it", async () => {
  const { child, pid } = await startNode("npm", ["run", "runway", "--"], "npm-term-node");
  expect(pid).not.toBe(child.pid);
  const exit = await child.kill("SIGTERM");
  expect(exit, child.lines.join("\n")).toEqual({ code: 0, signal: null });
  await drained(child, "npm-term-node", pid, "SIGTERM");
});

it("SIGKILL of npm run runway -- node does not leave the node running: it notices npm is gone, drains and exits", async () => {
  const { child, pid } = await startNode("npm", ["run", "runway", "--"], "npm-kill-node");
  expect(pid).not.toBe(child.pid);
  await child.kill("SIGKILL");
  await drained(child, "npm-kill-node", pid, "npm_gone");
});
