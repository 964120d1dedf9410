import { expect, it } from "vitest";
import { childStartKey, runIdFor } from "../../actors/index.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "subtree-node" });

it("subtree cancel of three-deep trees, each cancelled at another moment while its children are being created: every run in each subtree ends cancelled, none outside it", async () => {
  const c = world.client;
  const publish = async (def: object) => expect((await c.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  await publish({ name: "leaf", nodes: [{ id: "work", kind: "code", handler: "slow", input: { ms: 30_000 } }] });
  await publish({ name: "mid", nodes: [{ id: "down", kind: "subworkflow", workflow: "leaf" }] });
  await publish({ name: "root", nodes: [{ id: "down", kind: "subworkflow", workflow: "mid" }] });
  await publish({ name: "bystander", nodes: [{ id: "work", kind: "code", handler: "slow", input: { ms: 500 } }] });
  const bystander = ((await c.startRun({ definition: "bystander" })).run as RunAnswer).id;
  // A sibling tree that nobody cancels: it must keep running.
  const untouched = ((await c.startRun({ definition: "root", start_key: { source: "test", delivery_id: "untouched" } })).run as RunAnswer).id;

  const roots: string[] = [];
  await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const root = ((await c.startRun({ definition: "root", start_key: { source: "test", delivery_id: `tree-${i}` } })).run as RunAnswer).id;
      roots.push(root);
      // Cancel at different moments: before the middle run exists, while it or the leaf is created, after.
      await new Promise((r) => setTimeout(r, i * 15));
      const answer = await c.cancelRun(root, "subtree test");
      expect(["cancelled", "not_cancellable"]).toContain(answer.outcome);
    }),
  );
  const treeOf = (root: string) => {
    const mid = runIdFor("t1", childStartKey(root, "down"));
    return [root, mid, runIdFor("t1", childStartKey(mid, "down"))];
  };
  const seen = { cancelled: 0, absent: 0 };
  for (const root of roots) {
    for (const id of treeOf(root)) {
      // A run that was never born is fine; every one that was ends cancelled.
      const status = await waitFor(
        async () => {
          const got = await c.getRun(id);
          if (got.outcome === "run_not_found") return "absent";
          const s = (got.run as RunAnswer).status;
          return s === "running" || s === "queued" || s === "waiting" ? undefined : s;
        },
        { timeoutMs: 20_000, describe: `run ${id} to end` },
      );
      expect(["cancelled", "absent"], id).toContain(status);
      seen[status as "cancelled" | "absent"]++;
    }
  }
  console.log(`subtree cancel: ${seen.cancelled} runs cancelled, ${seen.absent} children never born (refused or not yet asked for)`);
  // Nothing outside the subtrees was touched.
  for (const id of treeOf(untouched))
    await waitFor(async () => ((await c.getRun(id)).run as RunAnswer | undefined)?.status === "running" || undefined, {
      timeoutMs: 20_000,
      describe: `run ${id} of the untouched tree to run`,
    });
  expect((await world.settled(bystander)).status).toBe("succeeded");
  await c.cancelRun(untouched);
});
