import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { startEffectsServer } from "../fixtures/mcp/start.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
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
  const done = await finished(client, id);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ after: { value: 42 } });
  await node.kill("SIGTERM");
});

it("an approval survives a SIGKILL of its node: approved after the restart, the approved call executes exactly once", async () => {
  const fx = await startEffectsServer({ http: true });
  try {
    let node = await startWorkflowNode(world, "wait-node");
    const client = new RunwayClient(world.nc, "w2");
    await client.createTenant("w2");
    expect((await client.putToolServer({ name: "pay", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
    const def = {
      name: "gated-charge",
      nodes: [
        { id: "gate", kind: "approval", prompt: "Charge?", payload: { account: "k", amount: 5 }, group: "finance" },
        { id: "pay", kind: "tool", needs: ["gate"], server: "pay", tool: "charge", arguments: "${steps.gate.output.payload}" },
      ],
    };
    expect((await client.putDefinition(def)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "gated-charge" })).run as RunAnswer).id;
    await waitFor(async () => ((await client.approvals()).approvals as unknown[]).length > 0 || undefined, {
      timeoutMs: 30_000,
      describe: "the approval to be listed",
    });
    await node.kill("SIGKILL");
    node = await startWorkflowNode(world, "wait-node");
    expect(((await client.approvals()).approvals as { id: string }[]).map((a) => a.id)).toEqual([`${id}:gate`]);
    const decided = await waitFor(
      async () => {
        const a = await client.decide(`${id}:gate`, "approve", { by: "alice" }).catch(() => undefined);
        return a?.outcome === "decided" ? a : undefined;
      },
      { timeoutMs: 30_000, describe: "the decision to be taken" },
    );
    expect(decided).toMatchObject({ decision: "approved" });
    const done = await finished(client, id);
    expect(done.status).toBe("succeeded");
    expect(fx.counts().effects.charge).toBe(1);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
  }
});
