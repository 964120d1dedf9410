import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { childStartKey, runIdFor } from "../../actors/index.js";
import { singleServerWorld, startWorkflowNode } from "./node-process.js";
import { endOf, type RunAnswer } from "../integration/workflow-support.js";

/**
 * A cancel's cascade across nodes (C097): the 30-minute soak saw a tree's second child, on another
 * node than its root, end succeeded after the root's cancel. Here each tree is cancelled as its
 * children end their second step, on two node processes: every child must end cancelled.
 */
const world = singleServerWorld();

it("C097 on two nodes: 40 trees, each cancelled as its children in parallel branches end their second step: every child ends cancelled, whatever node serves it", async () => {
  await startWorkflowNode(world, "tc-a", { leaseTtlMs: 3_000 });
  await startWorkflowNode(world, "tc-b", { leaseTtlMs: 3_000 });
  const c = new RunwayClient(world.nc, "tc");
  await c.createTenant("tc");
  const publish = async (def: object) => expect((await c.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const step = (id: string, needs: string[] = [], ms = 800) => ({ id, kind: "code", handler: "slow", input: { ms }, needs });
  await publish({ name: "kid", nodes: [step("s1"), step("s2", ["s1"]), step("s3", ["s2"]), step("s4", ["s3"])] });
  await publish({
    name: "tree",
    input_schema: { type: "object", required: ["items"], properties: { items: { type: "array" } } },
    nodes: [
      step("root", [], 20),
      {
        id: "both",
        kind: "parallel",
        needs: ["root"],
        branches: [
          [{ id: "kid", kind: "subworkflow", workflow: "kid" }],
          [{ id: "kid_b", kind: "subworkflow", workflow: "kid" }],
          [{ id: "slow_map", kind: "map", items: "${input.items}", handler: "slow", input: { ms: 800 }, max_fanout: 10, concurrency: 2 }],
        ],
      },
    ],
  });
  const bad: string[] = [];
  await Promise.all(
    Array.from({ length: 40 }, async (_, i) => {
      const root = (
        (await c.startRun({ definition: "tree", input: { items: [1, 2, 3, 4, 5, 6] }, start_key: { source: "test", delivery_id: `tc-${i}` } })).run as RunAnswer
      ).id;
      const kids = [runIdFor("tc", childStartKey(root, "kid")), runIdFor("tc", childStartKey(root, "kid_b"))];
      await new Promise((r) => setTimeout(r, 1_400 + (i % 8) * 60));
      await c.cancelRun(root, "test");
      for (const id of kids) {
        const status = await endOf(c, id);
        if (status !== "cancelled" && status !== "absent") bad.push(`${i} ${id} ${status}`);
      }
    }),
  );
  expect(bad).toEqual([]);
});
