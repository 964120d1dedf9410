import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { RUNWAY_USER, spawnTsx, waitFor, type ChildHandle } from "../harness/index.js";
import { singleServerWorld } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const world = singleServerWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-kill-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

async function startNode(): Promise<ChildHandle> {
  const child = spawnTsx(
    cli,
    [
      "node",
      "--servers",
      world.server.url,
      "--user",
      RUNWAY_USER.user,
      "--pass",
      RUNWAY_USER.pass,
      "--name",
      "kill-node",
      "--handlers",
      handlers,
      "--lease-ttl-ms",
      "3000",
    ],
    {
      name: "kill-node",
      env: { RUNWAY_LOG: "warn" },
    },
  );
  world.children.push(child);
  await child.waitForLine(/^READY /, { timeoutMs: 30_000 });
  return child;
}

/** Waits until every run in `runs` has succeeded (after a restart, recovery takes a moment). */
function allSucceeded(client: RunwayClient, runs: string[]): Promise<RunAnswer[]> {
  return waitFor(
    async () => {
      const views = await Promise.all(runs.map(async (id) => (await client.getRun(id)).run as RunAnswer));
      return views.every((v) => v.status === "succeeded") ? views : undefined;
    },
    { timeoutMs: 60_000, describe: "every run to finish after the restart" },
  );
}

it("SIGKILL of the node mid-run: the run completes after restart and no completed step's handler ran twice", async () => {
  const ledger = join(dir, "ledger.txt");
  let node = await startNode();
  const client = new RunwayClient(world.nc, "k1");
  await client.createTenant("k1");
  // Ten sequential steps and a map of eight: each invocation appends "<run> <step> <attempt>" to the ledger.
  const nodes: object[] = [];
  for (let i = 0; i < 10; i++)
    nodes.push({ id: `s${i}`, kind: "code", handler: "count_invocations", input: { file: ledger, value: i }, ...(i > 0 ? { needs: [`s${i - 1}`] } : {}) });
  nodes.push({
    id: "fan",
    kind: "map",
    needs: ["s9"],
    items: "${input.items}",
    handler: "count_invocations",
    input: { file: ledger, value: "${item}" },
    max_fanout: 8,
    concurrency: 2,
  });
  expect((await client.putDefinition({ name: "long-flow", nodes })).outcome).toBe("published");
  const runs: string[] = [];
  for (let r = 0; r < 4; r++) {
    const s = await client.startRun({ definition: "long-flow", input: { items: [1, 2, 3, 4, 5, 6, 7, 8] } });
    runs.push((s.run as RunAnswer).id);
  }
  // Kill once some but not all steps are done.
  const committed = await waitFor(
    async () => {
      const views = await Promise.all(runs.map(async (id) => (await client.getRun(id)).run as RunAnswer));
      const done = views.flatMap((v) =>
        Object.entries(v.nodes)
          .filter(([, n]) => n.status === "succeeded")
          .map(([step]) => `${v.id} ${step}`),
      );
      return done.length >= 8 ? done : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 5, describe: "some steps to complete" },
  );
  await node.kill("SIGKILL");
  const beforeRestart = readFileSync(ledger, "utf8").trim().split("\n").length;
  node = await startNode();
  const final = await allSucceeded(client, runs);
  expect(final).toHaveLength(runs.length);
  const lines = readFileSync(ledger, "utf8").trim().split("\n");
  const perStep = new Map<string, string[]>();
  for (const line of lines) {
    const [run, step, attempt] = line.split(" ");
    const key = `${run} ${step}`;
    perStep.set(key, [...(perStep.get(key) ?? []), attempt!]);
  }
  // On a failure, say in what order the handler ran and what the run's journal says of the step.
  const twice = committed.filter((key) => (perStep.get(key) ?? []).length > 1);
  if (twice.length > 0) {
    const [run, step] = twice[0]!.split(" ");
    const events = ((await client.runEvents(run!, { limit: 500 })).events ?? []) as { type: string; data?: { node?: string } }[];
    console.log(`ledger (the first ${beforeRestart} lines before the restart):\n${lines.join("\n")}`);
    console.log(`committed before the kill: ${committed.join(", ")}`);
    console.log(
      `events of ${run} for ${step}:\n${events
        .filter((e) => e.data?.node === step || !e.data?.node)
        .map((e) => JSON.stringify(e))
        .join("\n")}`,
    );
  }
  // Each step committed before the kill ran exactly once.
  for (const key of committed) {
    const [run, step] = key.split(" ");
    if (step === "fan") continue;
    expect(perStep.get(`${run} ${step}`), key).toHaveLength(1);
  }
  // No attempt of any step ran twice; only attempts lost in the crash were retried.
  for (const [key, attempts] of perStep) expect(new Set(attempts).size, key).toBe(attempts.length);
  console.log(
    `workflow kill: ${committed.length} steps committed before SIGKILL, ${lines.length} invocations in all, ${[...perStep.values()].filter((a) => a.length > 1).length} steps re-run after losing their attempt`,
  );
  // The next test starts its own node under the same name: two live processes of one node would fight over the partitions.
  await node.kill("SIGTERM");
});

it("SIGKILL while runs wait behind their tenant's cap: after the restart every accepted run runs to the end, no attempt twice, and the tenant gives every slot back", async () => {
  const ledger = join(dir, "queued.txt");
  let node = await startNode();
  const client = new RunwayClient(world.nc, "k2");
  await client.createTenant("k2", { max_concurrency: 2 });
  expect(
    (
      await client.putDefinition({
        name: "paced",
        nodes: [
          { id: "work", kind: "code", handler: "count_invocations", input: { file: ledger, value: 1 } },
          { id: "pause", kind: "code", needs: ["work"], handler: "slow", input: { ms: 200 } },
        ],
      })
    ).outcome,
  ).toBe("published");
  const runs: string[] = [];
  for (let r = 0; r < 10; r++) runs.push(((await client.startRun({ definition: "paced" })).run as RunAnswer).id);
  // Kill while some runs have finished, some hold the two slots and the rest are queued.
  await waitFor(
    async () => {
      const views = await Promise.all(runs.map(async (id) => (await client.getRun(id)).run as RunAnswer));
      const done = views.filter((v) => v.status === "succeeded").length;
      const queued = views.filter((v) => v.status === "queued").length;
      return done >= 2 && queued >= 2 ? true : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 5, describe: "some runs done and some still queued" },
  );
  await node.kill("SIGKILL");
  node = await startNode();
  const final = await allSucceeded(client, runs);
  expect(final).toHaveLength(10);
  // Each run's first step ran once per attempt and no attempt twice (a lost attempt is retried as a new one).
  const lines = readFileSync(ledger, "utf8")
    .trim()
    .split("\n")
    .map((l) => l.split(" "));
  for (const id of runs) {
    const attempts = lines.filter(([run]) => run === id).map(([, , attempt]) => attempt);
    expect(attempts.length, id).toBeGreaterThanOrEqual(1);
    expect(new Set(attempts).size, id).toBe(attempts.length);
  }
  await waitFor(async () => ((await client.getTenant()).tenant as { active_runs: number; queued_runs: number }).active_runs === 0 || undefined, {
    timeoutMs: 20_000,
    describe: "every slot to be given back",
  });
  expect((await client.getTenant()).tenant).toMatchObject({ active_runs: 0, queued_runs: 0 });
  await node.kill("SIGTERM");
});
