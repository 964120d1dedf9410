import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const world = singleServerWorld();

it("a run waiting for a signal survives a SIGKILL of its node: after the restart it still waits, and the signal completes it", async () => {
  let node = await startWorkflowNode(world, "wait-node");
  const client = new RunwayClient(world.nc, "w1");
  await client.createTenant("w1");
  const def = {
    name: "held",
    nodes: [
      { id: "gate", kind: "wait", signal: "go", timeout_ms: 3 * 24 * 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
    ],
  };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const id = ((await client.startRun({ definition: "held" })).run as RunAnswer).id;
  const waiting = (run: string) =>
    waitFor(async () => ((await client.getRun(run)).run as RunAnswer).status === "waiting" || undefined, { timeoutMs: 30_000, describe: "the run to wait" });
  await waiting(id);
  await node.kill("SIGKILL");
  node = await startWorkflowNode(world, "wait-node");
  await waiting(id);
  // Delivered by the restarted node once it serves the run's partition again.
  const sent = await waitFor(
    async () => {
      const a = await client.signal(id, "go", { value: 42 }).catch(() => undefined);
      return a?.outcome === "delivered" ? a : undefined;
    },
    { timeoutMs: 30_000, describe: "the signal to be delivered" },
  );
  expect(sent).toEqual({ outcome: "delivered", nodes: ["gate"] });
  const done = await waitFor(
    async () => {
      const r = (await client.getRun(id)).run as RunAnswer;
      return r.status === "succeeded" || r.status === "failed" ? r : undefined;
    },
    { timeoutMs: 30_000, describe: "the run to finish" },
  );
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ after: { value: 42 } });
  await node.kill("SIGTERM");
});
