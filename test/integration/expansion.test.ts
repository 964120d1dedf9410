import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

const dir = mkdtempSync(join(tmpdir(), "runway-expansion-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const world = workflowWorld({ name: "expansion-node" });

type Tenant = { active_descendants: number };
const tenantOf = async (client: RunwayClient) => (await client.getTenant()).tenant as Tenant;

it("admission refuses a map over the tenant's active-descendant quota with a code, before any child; released items make room again", async () => {
  const client = new RunwayClient(world.nc, "e1");
  expect((await client.createTenant("e1", { expansion_limits: { max_active_descendants: 10 } })).outcome).toBe("created");
  const ledger = join(dir, "items.txt");
  const put = await client.putDefinition({
    name: "wide",
    nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "slow", input: { ms: "${input.ms}" }, max_fanout: 100 }],
  });
  expect(put.outcome).toBe("published");
  expect(
    (
      await client.putDefinition({
        name: "counted",
        nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "count_invocations", input: { file: ledger, value: "${item}" }, max_fanout: 100 }],
      })
    ).outcome,
  ).toBe("published");

  // Eight items held by a running map.
  const holder = (await client.startRun({ definition: "wide", input: { list: [1, 2, 3, 4, 5, 6, 7, 8], ms: 20_000 } })).run as RunAnswer;
  await waitFor(async () => (await tenantOf(client)).active_descendants === 8 || undefined, {
    timeoutMs: 15_000,
    describe: "the first map's items to be admitted",
  });

  // Five more would make 13 > 10: refused with the code, and no item ever ran.
  const over = (await client.startRun({ definition: "counted", input: { list: [1, 2, 3, 4, 5] } })).run as RunAnswer;
  const refused = await settled(client, over.id);
  expect(refused.status).toBe("failed");
  expect(refused.nodes.m).toMatchObject({ status: "failed", error: { code: "descendant_quota_exceeded" } });
  expect(refused.nodes.m!.items).toBeUndefined();
  expect(existsSync(ledger)).toBe(false);
  expect((await tenantOf(client)).active_descendants).toBe(8);

  // The holder ends: its items are given back, and the same map is admitted and runs.
  expect((await client.cancelRun(holder.id)).outcome).toBe("cancelled");
  await waitFor(async () => (await tenantOf(client)).active_descendants === 0 || undefined, {
    timeoutMs: 15_000,
    describe: "the cancelled map's items to be released",
  });
  const fits = (await client.startRun({ definition: "counted", input: { list: [1, 2, 3, 4, 5] } })).run as RunAnswer;
  const done = await settled(client, fits.id);
  expect(done.status).toBe("succeeded");
  expect(readFileSync(ledger, "utf8").trim().split("\n")).toHaveLength(5);
  await waitFor(async () => (await tenantOf(client)).active_descendants === 0 || undefined, {
    timeoutMs: 15_000,
    describe: "the settled map's items to be released",
  });
});

it("a map wider than the tenant's per-expansion limit is refused too_many_children", async () => {
  const client = new RunwayClient(world.nc, "e2");
  expect((await client.createTenant("e2", { expansion_limits: { max_children: 3 } })).outcome).toBe("created");
  expect(
    (await client.putDefinition({ name: "four", nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "echo", max_fanout: 100 }] })).outcome,
  ).toBe("published");
  const run = (await client.startRun({ definition: "four", input: { list: [1, 2, 3, 4] } })).run as RunAnswer;
  const done = await settled(client, run.id);
  expect(done.nodes.m).toMatchObject({ status: "failed", error: { code: "too_many_children" } });
});
