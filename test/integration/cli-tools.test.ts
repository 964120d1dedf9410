import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RUNWAY_USER, spawnTsx } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld } from "./workflow-support.js";

const world = workflowWorld({ name: "cli-tools-node" });
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "runway-cli-tools-"));
let fx: EffectsServerHandle;
beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
}, 30_000);
afterAll(async () => {
  await fx?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function runway(args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"], {
    name: `runway ${args[0]}`,
  });
  const exit = await child.exited;
  return { code: exit.code, out: child.lines.join("\n") };
}

it("runway tools: register a server from a file, list its tools with their classes, try one with tools call", async () => {
  const file = join(dir, "fx.json");
  writeFileSync(file, JSON.stringify({ name: "fx", transport: { type: "http", url: fx.url }, overrides: { get_value: "read_only" } }));
  const put = await runway(["tools", "servers", "put", file]);
  expect(put.code, put.out).toBe(0);
  expect(put.out).toContain('"saved"');
  expect((await runway(["tools", "servers", "ls"])).out).toContain('"name": "fx"');
  const listed = await runway(["tools", "ls", "--server", "fx"]);
  expect(listed.out).toMatch(/"name": "get_value",[\s\S]*?"class": "read_only"/);
  const called = await runway(["tools", "call", "fx", "set_value", "--args", '{"key":"cli","value":"yes"}']);
  expect(called.code, called.out).toBe(0);
  expect(called.out).toContain('"outcome": "ok"');
  expect(called.out).toContain('"value": "yes"');
  expect(fx.counts().values.cli).toBe("yes");
  const failed = await runway(["tools", "call", "fx", "fail"]);
  expect(failed.code, failed.out).toBe(1);
  expect(failed.out).toContain("tool_error");
  const bad = await runway(["tools", "call", "fx", "charge", "--args", "[1]"]);
  expect(bad.code, bad.out).toBe(2);
  expect((await runway(["tools", "servers", "rm", "fx"])).out).toContain('"deleted"');
  expect((await runway(["run", "held"])).out).toContain('"items": []');
  const settle = await runway(["run", "reconcile", "t1_nope", "--key", "k", "--decision", "done"]);
  expect(settle.code, settle.out).toBe(1);
  expect(settle.out).toContain("run_not_found");
});

it("runway run trajectory prints JSON lines; runway run replay exits 0 for an identical replay", async () => {
  const file = join(dir, "fx2.json");
  writeFileSync(file, JSON.stringify({ name: "fx2", transport: { type: "http", url: fx.url } }));
  expect((await runway(["tools", "servers", "put", file])).code).toBe(0);
  const def = join(dir, "traj.json");
  writeFileSync(def, JSON.stringify({ name: "traj", nodes: [{ id: "v", kind: "tool", server: "fx2", tool: "get_value", arguments: { key: "x" } }] }));
  expect((await runway(["def", "put", def])).code).toBe(0);
  const started = await runway(["run", "start", "traj"]);
  const id = /"id": "([^"]+)"/.exec(started.out)![1]!;
  await world.settled(id);
  const trajectory = await runway(["run", "trajectory", id]);
  expect(trajectory.code, trajectory.out).toBe(0);
  const lines = trajectory.out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { kind: string });
  expect(lines.map((l) => l.kind)).toEqual(expect.arrayContaining(["step", "tool_call"]));
  expect(lines.at(-1)?.kind).toBe("run");
  const replayed = await runway(["run", "replay", id]);
  expect(replayed.code, replayed.out).toBe(0);
  expect(replayed.out).toContain('"identical": true');
});
