import { expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { childStartKey, runIdFor, RUN_KIND } from "../../actors/index.js";
import { kvSubject, partitionBucket, partitionOf, partitionStream } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { endOf, workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "subtree-node" });

it("C097 subtree cancel of three-deep trees, each cancelled at another moment while its children are being created: every run in each subtree ends cancelled, none outside it", async () => {
  const c = world.client;
  const publish = async (def: object) => expect((await c.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  await publish({ name: "leaf", nodes: [{ id: "work", kind: "code", handler: "slow", input: { ms: 30_000 } }] });
  await publish({ name: "mid", nodes: [{ id: "down", kind: "subworkflow", workflow: "leaf" }] });
  await publish({ name: "root", nodes: [{ id: "down", kind: "subworkflow", workflow: "mid" }] });
  await publish({ name: "bystander", nodes: [{ id: "work", kind: "code", handler: "slow", input: { ms: 500 } }] });
  const bystander = ((await c.startRun({ definition: "bystander" })).run as RunAnswer).id;
  // A sibling tree that nobody cancels: it must keep running.
  const untouched = ((await c.startRun({ definition: "root", start_key: { source: "test", delivery_id: "untouched" } })).run as RunAnswer).id;

  const treeOf = (root: string) => {
    const mid = runIdFor("t1", childStartKey(root, "down"));
    return [root, mid, runIdFor("t1", childStartKey(mid, "down"))];
  };
  const born = (id: string) =>
    waitFor(async () => (await c.getRun(id)).outcome !== "run_not_found" || undefined, { timeoutMs: 20_000, describe: `run ${id} to be created` });
  const roots: string[] = [];
  await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const root = ((await c.startRun({ definition: "root", start_key: { source: "test", delivery_id: `tree-${i}` } })).run as RunAnswer).id;
      roots.push(root);
      // Cancel at different moments: before the middle run exists (or while it is created), once it
      // exists (while the leaf is created), after the leaf exists. Trees 3 to 7 are cancelled with
      // children, so a cancel that stops only the roots cannot pass for a subtree cancel below.
      const [, mid, leaf] = treeOf(root);
      if (i === 3) await born(mid!);
      if (i >= 4) await born(leaf!);
      await new Promise((r) => setTimeout(r, i < 3 ? i * 15 : (i - 4) * 15));
      const answer = await c.cancelRun(root, "subtree test");
      expect(["cancelled", "not_cancellable"]).toContain(answer.outcome);
    }),
  );
  const seen = { cancelled: 0, absent: 0 };
  let descendantsCancelled = 0;
  for (const root of roots) {
    for (const id of treeOf(root)) {
      // A run that was never born is fine; every one that was ends cancelled.
      const status = await endOf(c, id);
      expect(["cancelled", "absent"], id).toContain(status);
      seen[status as "cancelled" | "absent"]++;
      if (status === "cancelled" && id !== root) descendantsCancelled++;
      // Every descendant that exists is fenced by a raised cancellation epoch.
      if (status === "cancelled")
        expect(((await readActor(world.nc, RUN_KIND, id))!.context as unknown as RunRecord).run.cancellation_epoch, id).toBeGreaterThan(0);
    }
  }
  console.log(
    `subtree cancel: ${seen.cancelled} runs cancelled (${descendantsCancelled} descendants), ${seen.absent} children never born (refused or not yet asked for)`,
  );
  // The cancel reached the descendants, not the roots alone (trees 3 to 7 alone hold 9 of them).
  expect(descendantsCancelled).toBeGreaterThan(roots.length);
  // Nothing outside the subtrees was touched.
  for (const id of treeOf(untouched))
    await waitFor(async () => ((await c.getRun(id)).run as RunAnswer | undefined)?.status === "running" || undefined, {
      timeoutMs: 20_000,
      describe: `run ${id} of the untouched tree to run`,
    });
  expect((await world.settled(bystander)).status).toBe("succeeded");
  await c.cancelRun(untouched);
});

type RunRecord = { run: { cancellation_epoch: number } };

/** How many records of each run are stored (a run keeps every write: its history is its journal), by run id. */
async function writesOf(ids: readonly string[]): Promise<Map<string, number>> {
  const jsm = await jetstreamManager(world.nc);
  const out = new Map<string, number>();
  const byPartition = new Map<number, string[]>();
  for (const id of ids) byPartition.set(partitionOf(id, 32), [...(byPartition.get(partitionOf(id, 32)) ?? []), id]);
  for (const [p, runs] of byPartition) {
    const subjects = (await jsm.streams.info(partitionStream(p), { subjects_filter: kvSubject(partitionBucket(p), `${RUN_KIND}.>`) })).state.subjects ?? {};
    for (const id of runs) out.set(id, subjects[kvSubject(partitionBucket(p), `${RUN_KIND}.${id}`)] ?? 0);
  }
  return out;
}

const WIDE = 500;

it("C098 cancelling the root of a wide tree (500 children, the most a definition may hold) writes the root's record once, its one outbox telling every child; each child then writes its own cancel once, and the root is never written again", async () => {
  const c = world.client;
  const publish = async (def: object) => expect((await c.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  await publish({ name: "nap", nodes: [{ id: "nap", kind: "sleep", duration_ms: 3_600_000 }] });
  await publish({ name: "wide", nodes: Array.from({ length: WIDE }, (_, i) => ({ id: `c${i}`, kind: "subworkflow", workflow: "nap" })) });
  const root = ((await c.startRun({ definition: "wide" })).run as RunAnswer).id;
  const children = Array.from({ length: WIDE }, (_, i) => runIdFor("t1", childStartKey(root, `c${i}`)));
  await waitFor(
    async () => {
      for (const id of children) if (((await c.getRun(id)).run as RunAnswer | undefined)?.status !== "waiting") return undefined;
      return true;
    },
    { timeoutMs: 60_000, describe: "every child to be waiting" },
  );
  const before = await writesOf([root, ...children]);

  expect((await c.cancelRun(root, "wide test")).outcome).toBe("cancelled");
  // On the request path: one write of the root's record, whose outbox carries a cancel for each child.
  expect((await writesOf([root])).get(root)).toBe(before.get(root)! + 1);
  const stored = (await readActor(world.nc, RUN_KIND, root))!;
  const told = stored.outbox.filter((e) => e.effect.type === "runway.send" && (e.effect.event as { type: string }).type === "run.cancel");
  expect(new Set(told.map((e) => (e.effect as { to: { id: string } }).to.id))).toEqual(new Set(children));

  for (const id of children)
    await waitFor(async () => ((await c.getRun(id)).run as RunAnswer).status === "cancelled" || undefined, {
      timeoutMs: 30_000,
      describe: `child ${id} to be cancelled`,
    });
  // Every child ends cancelled with one write of its own; their reports to the ended root cost it no write.
  const after = await writesOf([root, ...children]);
  expect(after.get(root)).toBe(before.get(root)! + 1);
  const childWrites = children.map((id) => after.get(id)! - before.get(id)!);
  expect(childWrites.every((n) => n === 1)).toBe(true);
  console.log(
    `wide cancel: root written once for ${WIDE} children; ${told.length} child cancels in its one outbox; ${childWrites.length} child writes off the request path`,
  );
});
