// Issue 39 §3: `runway dev` runs its embedded server with credentials on. What it prints for
// another shell (RUNWAY_NKEY, NATS_NKEY) is all the runway and nats CLIs need to speak as the
// dev tenant; without a key the server refuses the connection; the tenant's key reaches only its
// own subjects; the run it starts names that key as its initiator. Real processes throughout.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { natsCli, repoRoot, spawnProcess, type ChildHandle } from "../harness/index.js";

const BIN = fileURLToPath(new URL("../../bin/runway.mjs", import.meta.url));
const BASE_ENV = { npm_lifecycle_event: undefined, npm_config_update_notifier: "false", RUNWAY_PROFILE: "small-host", RUNWAY_NKEY: undefined };
const store = mkdtempSync(join(tmpdir(), "runway-dev-creds-"));
let dev: ChildHandle;
/** What `runway dev` told another shell to export. */
let exported: Record<string, string> = {};

beforeAll(async () => {
  dev = spawnProcess(BIN, ["dev", "--store", store, "--http-port", "0", "--tenant", "devt"], { cwd: repoRoot, env: BASE_ENV, name: "runway dev" });
  const line = await dev.waitForLine(/^\s*export RUNWAY_SERVERS=/, { timeoutMs: 60_000 });
  exported = Object.fromEntries(
    line
      .trim()
      .replace(/^export /, "")
      .split(" ")
      .map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
  );
});
afterAll(async () => {
  if (dev?.isRunning()) await dev.kill("SIGKILL");
});

/** `runway <args>` as another shell runs it, with `env` over what dev printed. */
async function runway(args: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number | null; out: string }> {
  const child = spawnProcess(BIN, args, { cwd: repoRoot, env: { ...BASE_ENV, ...exported, ...env }, name: `runway ${args.slice(0, 2).join(" ")}` });
  const exit = await child.exited;
  return { code: exit.code, out: child.lines.join("\n") };
}

it("39.3 runway dev prints RUNWAY_SERVERS, RUNWAY_NKEY and NATS_NKEY; with them the runway CLI speaks as the dev tenant, and the run it starts names that key as its initiator", async () => {
  expect(Object.keys(exported).sort()).toEqual(["NATS_NKEY", "NATS_URL", "RUNWAY_NKEY", "RUNWAY_SERVERS"]);
  const definition = join(store, "hello.json");
  writeFileSync(definition, JSON.stringify({ name: "hello", nodes: [{ id: "s", kind: "code", handler: "check_stock" }], result: "${steps.s.output}" }));
  const put = await runway(["def", "put", definition, "--tenant", "devt"]);
  expect(put.code, put.out).toBe(0);
  const start = await runway(["run", "start", "hello", "--tenant", "devt"]);
  expect(start.code, start.out).toBe(0);
  const id = /"id": "([^"]+)"/.exec(start.out)![1]!;
  const watched = await runway(["run", "watch", id, "--tenant", "devt"]);
  expect(watched.code, watched.out).toBe(0);
  const got = await runway(["run", "get", id, "--tenant", "devt"]);
  expect(got.out).toMatch(/"status": "succeeded"/);
  expect(got.out).toMatch(/"initiator": "nats:devt\/devt"/);
});

it("39.3 runway dev: with no key the server refuses the connection, one line and exit 3; a file that is no seed is a usage error, exit 2", async () => {
  const none = await runway(["run", "list", "--tenant", "devt"], { RUNWAY_NKEY: undefined });
  expect(none.code, none.out).toBe(3);
  expect(none.out).toMatch(/^runway: NATS at \S+ refused the credentials \(none given\): check --user and --pass, or --nkey \(env RUNWAY_NKEY\)$/);
  const notSeed = await runway(["run", "list", "--tenant", "devt", "--nkey", definitionLike()]);
  expect(notSeed.code, notSeed.out).toBe(2);
  expect(notSeed.out).toMatch(/--nkey \S+: not a user NKey seed/);
});

it("39.3 runway dev: the nats CLI with the printed NATS_NKEY reaches the dev tenant's API, and the server refuses another tenant's subjects and JetStream", async () => {
  const auth = { auth: ["--nkey", exported.NATS_NKEY!], timeoutMs: 20_000 };
  const own = await natsCli(exported.NATS_URL!, ["--timeout", "5s", "req", "runway.v1.devt.runs.list", "{}"], auth);
  expect(own.code, own.stderr).toBe(0);
  expect(own.stdout).toMatch(/"outcome":"ok"/);
  const other = await natsCli(exported.NATS_URL!, ["--timeout", "2s", "req", "runway.v1.other.runs.list", "{}"], auth);
  expect(other.stdout + other.stderr).toMatch(/Permissions Violation for Publish to "runway.v1.other.runs.list"/);
  const kv = await natsCli(exported.NATS_URL!, ["--timeout", "2s", "kv", "ls"], auth);
  expect(kv.code).not.toBe(0);
  expect(kv.stdout + kv.stderr).toMatch(/Permissions Violation for Publish to "\$JS\.API/);
});

it("39.3 runway dev drains and exits 0 on SIGTERM", async () => {
  const exit = await dev.kill("SIGTERM");
  expect(exit, dev.lines.join("\n")).toEqual({ code: 0, signal: null });
  expect(dev.lines.some((l) => /"msg":"stopped","reason":"SIGTERM"/.test(l))).toBe(true);
});

/** A readable file that is not a seed. */
function definitionLike(): string {
  const path = join(store, "not-a-seed.nk");
  writeFileSync(path, "hello\n");
  return path;
}
