import { afterAll, beforeAll, expect, it } from "vitest";
import { waitFor } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * G4 (issue 38 §3): a turn is a checkpoint of what it was made with. Its stored response carries
 * the manifest of the model and the tools as the model saw them; a new attempt that finds another
 * (here: the tool server registered again, untrusted, so its tools' classes changed while the run
 * waited for a person) does not go on from it: the node fails `checkpoint_mismatch`.
 */

const world = workflowWorld({ name: "agent-checkpoint" });
let fx: EffectsServerHandle;

type View = RunAnswer & { waiting: { on: string; ref: string } | null; error?: { code: string; message: string } | null };
const view = async (id: string) => (await world.client.getRun(id)).run as View;

const DEFINITION = {
  name: "agent-checkpoint",
  approvals: { tools: ["fx/set_value"], group: "ops", prompt: "Set it?" },
  nodes: [{ id: "ask", kind: "agent", model: "cp/m1", instructions: "Use the tools.", input: "${input.q}", tools: ["fx/set_value", "fx/get_value"] }],
};

beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  const c = world.client;
  expect((await c.putToolServer({ name: "fx", transport: { type: "http", url: fx.url }, trusted: true })).outcome).toBe("saved");
  const script = { turns: [{ tool_calls: [{ name: "fx__set_value", arguments: { key: "cp", value: "set" } }] }, { text: "done" }] };
  expect((await c.putModelProvider({ name: "cp", kind: "scripted", script })).outcome).toBe("created");
  expect((await c.putDefinition(DEFINITION)).outcome).toMatch(/published|unchanged/);
}, 60_000);
afterAll(async () => {
  await fx?.stop();
});

/** Starts a run and waits until it waits for the person its turn 0 asked; answers the approval's id. */
async function parked(q: string): Promise<{ id: string; approval: string }> {
  const id = ((await world.client.startRun({ definition: DEFINITION.name, input: { q } })).run as RunAnswer).id;
  const approval = `${id}:ask:turn0:approval.fx/set_value`;
  await waitFor(async () => ((await view(id)).waiting?.ref === approval ? true : undefined), { timeoutMs: 20_000, describe: `${id} to wait on ${approval}` });
  return { id, approval };
}

async function ended(id: string): Promise<View> {
  return waitFor(
    async () => {
      const v = await view(id);
      return v.status === "succeeded" || v.status === "failed" ? v : undefined;
    },
    { timeoutMs: 20_000, describe: `${id} to end` },
  );
}

it("G4 an agent goes on from its stored turns when its tools are as they were, and refuses to (checkpoint_mismatch, no call made) when they changed while it waited", async () => {
  const c = world.client;
  const same = await parked("unchanged");
  expect((await c.decide(same.approval, "approve")).outcome).toBe("decided");
  expect((await ended(same.id)).status).toBe("succeeded");
  const calls = fx.counts().effects.set_value ?? 0;
  expect(calls).toBe(1);

  const changed = await parked("changed");
  // The same server, registered again untrusted: its tools' annotations no longer count, so their classes change.
  expect((await c.putToolServer({ name: "fx", transport: { type: "http", url: fx.url }, trusted: false })).outcome).toBe("saved");
  expect((await c.decide(changed.approval, "approve")).outcome).toBe("decided");
  const failed = await ended(changed.id);
  expect(failed.status).toBe("failed");
  const events = (await c.runEvents(changed.id)).events as { type: string; node?: string; error?: { code: string; message: string } }[];
  const stepFailed = events.find((e) => e.type === "step_failed" && e.node === "ask");
  expect(stepFailed?.error?.code).toBe("checkpoint_mismatch");
  expect(stepFailed?.error?.message).toMatch(/turn 0 was answered with other tools or another model/);
  // The approved call was not made from a conversation its tools no longer match.
  expect(fx.counts().effects.set_value ?? 0).toBe(calls);
});
