import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { partitionOf } from "../../runtime/index.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { workflowWorld } from "./workflow-support.js";

const world = workflowWorld();
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "runway-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function runway(args: string[], tenant = "t1"): Promise<{ code: number | null; out: string }> {
  const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", tenant], {
    name: `runway ${args[0]}`,
  });
  const exit = await child.exited;
  return { code: exit.code, out: child.lines.join("\n") };
}

it("the runway CLI publishes a definition, starts a run, watches it live to the end and reads it", async () => {
  const file = join(dir, "flow.json");
  writeFileSync(
    file,
    JSON.stringify({
      name: "cli-flow",
      nodes: [
        { id: "a", kind: "code", handler: "slow", input: { ms: 300 } },
        { id: "b", kind: "code", needs: ["a"], handler: "echo", input: "done" },
      ],
    }),
  );
  const put = await runway(["def", "put", file]);
  expect(put.code, put.out).toBe(0);
  expect(put.out).toContain('"published"');
  const started = await runway(["run", "start", "cli-flow", "--key", "cli:one"]);
  expect(started.code, started.out).toBe(0);
  const id = /"id": "([^"]+)"/.exec(started.out)?.[1];
  expect(id).toBeDefined();
  const watched = await runway(["run", "watch", id!]);
  expect(watched.code, watched.out).toBe(0);
  expect(watched.out).toMatch(/run_started/);
  expect(watched.out).toMatch(/step_succeeded\s+a/);
  // Stored events carry their journal id (`<revision>.<index>`).
  expect(watched.out).toMatch(/\d+\.\d+\s+run_succeeded/);
  const got = await runway(["run", "get", id!]);
  expect(got.out).toContain('"status": "succeeded"');
  const again = await runway(["run", "start", "cli-flow", "--key", "cli:one"]);
  expect(again.out).toContain('"duplicate"');
});

it("runway def disable refuses new starts of a definition (exit 0, disabled; the start exits 1, definition_not_published) until def enable", async () => {
  const file = join(dir, "off.json");
  writeFileSync(file, JSON.stringify({ name: "cli-off", nodes: [{ id: "a", kind: "code", handler: "noop" }] }));
  expect((await runway(["def", "put", file])).code).toBe(0);
  const off = await runway(["def", "disable", "cli-off"]);
  expect(off.code, off.out).toBe(0);
  expect(off.out).toContain('"disabled"');
  const refused = await runway(["run", "start", "cli-off"]);
  expect(refused.code, refused.out).toBe(1);
  expect(refused.out).toMatch(/^runway: run start: definition_not_published: cli-off is disabled$/m);
  expect((await runway(["def", "enable", "cli-off"])).code).toBe(0);
  expect((await runway(["run", "start", "cli-off"])).code).toBe(0);
  expect((await runway(["def", "disable"])).code).toBe(2);
});

it("an answer that is not the command's success exits 1: run get of an unknown run, run start of an unknown definition (the answer on stdout, one line on stderr)", async () => {
  const got = await runway(["run", "get", "t1_0123456789abcdef0123456789abcdee"]);
  expect(got.code, got.out).toBe(1);
  expect(JSON.parse(got.out.slice(got.out.indexOf("{"), got.out.lastIndexOf("}") + 1))).toEqual({ outcome: "run_not_found" });
  expect(got.out).toMatch(/^runway: run get: run_not_found$/m);
  const started = await runway(["run", "start", "no-such-flow"]);
  expect(started.code, started.out).toBe(1);
  expect(started.out).toContain('"definition_not_found"');
  expect(started.out).toMatch(/^runway: run start: definition_not_found$/m);
});

it("the CLI refuses a tenant id the API would refuse as a usage error (exit 2), not an API answer", async () => {
  const created = await runway(["tenant", "create", "Bad Tenant!"]);
  expect(created.code, created.out).toBe(2);
  expect(created.out).toContain("tenant id");
  const listed = await runway(["run", "list"], "*");
  expect(listed.code, listed.out).toBe(2);
  expect(listed.out).toContain("--tenant");
});

it("runway ops dead-letters lists the dead letters newest first (runway.v1.ops.dead_letters); the node's metrics count them by kind and reason", async () => {
  // Two commands no run can read, straight into a mailbox of the node's partitions: dead-lettered at once.
  const runId = "t1_0123456789abcdef0123456789abcdef";
  const subject = `rw.cmd.${partitionOf(runId, 32)}.run.${runId}`;
  for (const body of [[0xc1], [0xc1, 0x02]]) await world.nc.request(subject, new Uint8Array(body), { timeout: 5_000 });
  const metrics = await waitFor(
    async () => {
      const m = (await world.client.call("runway.v1.ops.metrics", {})) as unknown as { metrics: { dead_letters?: Record<string, number> } };
      return (m.metrics.dead_letters?.["kind=run,reason=undecodable"] ?? 0) >= 2 ? m : undefined;
    },
    { timeoutMs: 10_000, describe: "the node to count two dead letters" },
  );
  expect(metrics.metrics.dead_letters).toMatchObject({ "kind=run,reason=undecodable": 2 });
  const listed = await runway(["ops", "dead-letters", "--limit", "1"]);
  expect(listed.code, listed.out).toBe(0);
  const answer = JSON.parse(listed.out) as { outcome: string; letters: { reason: string; kind: string; id: string; subject: string; data_base64: string }[] };
  expect(answer.outcome).toBe("ok");
  expect(answer.letters).toHaveLength(1);
  expect(answer.letters[0]).toMatchObject({
    reason: "undecodable",
    kind: "run",
    id: runId,
    subject,
    data_base64: Buffer.from([0xc1, 0x02]).toString("base64"),
  });
  const both = await world.client.deadLetters(10);
  expect((both.letters as { id: string }[]).filter((l) => l.id === runId)).toHaveLength(2);
  const bad = await runway(["ops", "dead-letters", "--limit", "zero"]);
  expect(bad.code, bad.out).toBe(2);
});
