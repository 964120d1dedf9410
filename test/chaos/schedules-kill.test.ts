// Acceptance 8 (issue 39): a schedule firing every second across a SIGKILL of its node and a
// restart. The node is a real `runway node` process; the schedule catches up what it missed, so
// afterwards every due time from its first to its last has exactly one run, and no run exists for
// anything else. A firing is one run because its start key is (schedule, due time): the run id
// is derived from it, so "none twice" is "no run outside the due times", and "none lost" is
// "every due time has its run".
import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { runIdFor, startKey } from "../../actors/index.js";
import { partitionOf } from "../../runtime/index.js";
import { waitFor, type ChildHandle } from "../harness/index.js";
import { fenceOwners, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const world = singleServerWorld();
const TENANT = "sk";
const SECOND = 1_000;

type ScheduleView = { created_at: number; fired: number; last: { due: number } | null };

async function allRuns(client: RunwayClient): Promise<RunAnswer[]> {
  const out: RunAnswer[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listRuns({ limit: 500, ...(cursor ? { cursor } : {}) });
    out.push(...(page.runs as RunAnswer[]));
    cursor = (page.next_cursor as string | null) ?? undefined;
  } while (cursor);
  return out;
}

/** A `runway node` process whose partition leases live 3 s, so another node takes over soon after a SIGKILL. */
function shortLeaseNode(name: string): Promise<ChildHandle> {
  return startWorkflowNode(world, name, { leaseTtlMs: 3_000 });
}

/**
 * Every due time of the one-second schedule `name` from its first to its last firing has exactly
 * one run, all succeeded, and the tenant has no other run. Answers how many due times there were.
 */
async function oneRunPerDueTime(client: RunwayClient, tenant: string, name: string, anchor: number, last: number): Promise<number[]> {
  const due: number[] = [];
  for (let t = anchor + SECOND; t <= last; t += SECOND) due.push(t);
  const expected = new Map(due.map((t) => [runIdFor(tenant, startKey(`schedule:${name}`, new Date(t).toISOString())), t]));
  const runs = await waitFor(
    async () => {
      const listed = await allRuns(client);
      return listed.length >= due.length && listed.every((r) => r.status === "succeeded") ? listed : undefined;
    },
    { timeoutMs: 30_000, describe: `${due.length} runs, all succeeded` },
  );
  const ids = runs.map((r) => r.id);
  expect(new Set(ids).size, "no run listed twice").toBe(ids.length);
  expect(
    ids.filter((id) => !expected.has(id)),
    "runs that are no due time's",
  ).toEqual([]);
  expect(
    [...expected].filter(([id]) => !ids.includes(id)).map(([, t]) => new Date(t).toISOString()),
    "due times without a run",
  ).toEqual([]);
  return due;
}

it("a one-second schedule across a SIGKILL of its node and a restart: one run per due time, none lost, none twice", async () => {
  let node = await startWorkflowNode(world, "sched-kill");
  const client = new RunwayClient(world.nc, TENANT);
  await client.createTenant(TENANT);
  expect((await client.putDefinition({ name: "beat", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }] })).outcome).toBe("published");
  const put = await client.putSchedule({ name: "beat", definition: "beat", input: { n: 1 }, every: { ms: SECOND }, missed: { catch_up: 100 } });
  expect(put.outcome, JSON.stringify(put)).toBe("saved");
  const anchor = (put.schedule as ScheduleView).created_at;
  const schedule = async () => (await client.getSchedule("beat")).schedule as ScheduleView;

  await waitFor(async () => (await schedule()).fired >= 3 || undefined, { timeoutMs: 20_000, describe: "three firings before the kill" });
  await node.kill("SIGKILL");
  const killedAt = Date.now();
  // Down for a couple of due times at least (a restart takes a few seconds more).
  await new Promise((r) => setTimeout(r, 2 * SECOND));
  node = await startWorkflowNode(world, "sched-kill");
  const restartedAt = Date.now();
  await waitFor(async () => ((await schedule()).last?.due ?? 0) >= restartedAt + 2 * SECOND || undefined, {
    timeoutMs: 30_000,
    describe: "firings after the restart",
  });
  expect((await client.pauseSchedule("beat")).outcome).toBe("paused");
  const last = (await schedule()).last!.due;

  const due = await oneRunPerDueTime(client, TENANT, "beat", anchor, last);
  const missedWhileDown = due.filter((t) => t > killedAt && t < restartedAt);
  expect(missedWhileDown.length, "due times while the node was down").toBeGreaterThanOrEqual(2);
  expect((await schedule()).fired, "firings counted").toBeGreaterThanOrEqual(due.length);
  console.log(`schedule kill: ${due.length} due times, ${missedWhileDown.length} while the node was down`);
  await node.kill("SIGTERM");
});

it("two nodes: the schedule's owner is SIGKILLed; the other node takes its partition over and catches up, one run per due time", async () => {
  const tenant = "sk2";
  const nodes = new Map([
    ["sched-a", await shortLeaseNode("sched-a")],
    ["sched-b", await shortLeaseNode("sched-b")],
  ]);
  const client = new RunwayClient(world.nc, tenant);
  await client.createTenant(tenant);
  expect((await client.putDefinition({ name: "beat", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }] })).outcome).toBe("published");
  const partition = partitionOf(`${tenant}.beat`, 32);
  // Both nodes own partitions before the schedule exists, so its owner is one of them.
  const owner = await waitFor(
    async () => {
      const owners = await fenceOwners(world.nc, 32);
      const named = new Set(owners.map((o) => o.owner));
      return named.has("sched-a") && named.has("sched-b") ? owners[partition]!.owner : undefined;
    },
    { timeoutMs: 30_000, describe: "both nodes to own partitions" },
  );
  const put = await client.putSchedule({ name: "beat", definition: "beat", every: { ms: SECOND }, missed: { catch_up: 100 } });
  expect(put.outcome, JSON.stringify(put)).toBe("saved");
  const anchor = (put.schedule as ScheduleView).created_at;
  const schedule = async () => (await client.getSchedule("beat")).schedule as ScheduleView;
  await waitFor(async () => (await schedule()).fired >= 2 || undefined, { timeoutMs: 20_000, describe: "two firings before the kill" });
  await nodes.get(owner!)!.kill("SIGKILL");
  const killedAt = Date.now();
  const survivor = owner === "sched-a" ? "sched-b" : "sched-a";
  await waitFor(async () => (await fenceOwners(world.nc, 32))[partition]!.owner === survivor || undefined, {
    timeoutMs: 30_000,
    describe: `${survivor} to take partition ${partition} over`,
  });
  const tookOverAt = Date.now();
  await waitFor(async () => ((await schedule()).last?.due ?? 0) >= tookOverAt + 2 * SECOND || undefined, {
    timeoutMs: 30_000,
    describe: "firings after the takeover",
  });
  expect((await client.pauseSchedule("beat")).outcome).toBe("paused");
  const due = await oneRunPerDueTime(client, tenant, "beat", anchor, (await schedule()).last!.due);
  const whileOwnerless = due.filter((t) => t > killedAt && t < tookOverAt);
  expect(whileOwnerless.length, "due times while no node owned the schedule").toBeGreaterThanOrEqual(2);
  console.log(`schedule failover: ${due.length} due times, ${whileOwnerless.length} while no node owned it`);
  await nodes.get(survivor)!.kill("SIGTERM");
});
