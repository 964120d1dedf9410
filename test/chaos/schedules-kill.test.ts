// Acceptance 8 (issue 39): a schedule firing every second across a SIGKILL of its node and a
// restart. The node is a real `runway node` process; the schedule catches up what it missed, so
// afterwards every due time from its first to its last has exactly one run, and no run exists for
// anything else. A firing is one run because its start key is (schedule, due time): the run id
// is derived from it, so "none twice" is "no run outside the due times", and "none lost" is
// "every due time has its run".
import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { runIdFor, startKey } from "../../actors/index.js";
import { waitFor } from "../harness/index.js";
import { singleServerWorld, startWorkflowNode } from "./node-process.js";
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

  const due: number[] = [];
  for (let t = anchor + SECOND; t <= last; t += SECOND) due.push(t);
  const expected = new Map(due.map((t) => [runIdFor(TENANT, startKey("schedule:beat", new Date(t).toISOString())), t]));
  const missedWhileDown = due.filter((t) => t > killedAt && t < restartedAt);
  expect(missedWhileDown.length, "due times while the node was down").toBeGreaterThanOrEqual(2);

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
  expect((await schedule()).fired, "firings counted").toBeGreaterThanOrEqual(due.length);
  console.log(`schedule kill: ${due.length} due times, ${missedWhileDown.length} while the node was down, ${ids.length} runs`);
  await node.kill("SIGTERM");
});
