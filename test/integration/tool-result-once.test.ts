import { afterAll, beforeAll, expect, it } from "vitest";
import { RUN_KIND } from "../../actors/index.js";
import { readJournal } from "../../runtime/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Issue 38 §1: a tool step's result is journaled once. Its receipt holds the tool's answer; the
 * step's output names that receipt instead of a second copy in the same write. What a reader sees
 * (runs.get, a downstream step's template, the trajectory, a replay) is the same answer.
 */
const world = workflowWorld({ name: "result-once-node" });
let http: EffectsServerHandle;

beforeAll(async () => {
  http = await startEffectsServer({ http: true });
  expect((await world.client.putToolServer({ name: "fx-once", transport: { type: "http", url: http.url } })).outcome).toBe("saved");
}, 60_000);
afterAll(async () => {
  await http?.stop();
});

const count = (text: string, word: string) => text.split(word).length - 1;

it("a tool step's output is stored once in its journal write (the output names its receipt), and read back the same everywhere", async () => {
  const marker = "only-once-7c1f9e";
  const def = {
    name: "result-once",
    nodes: [
      { id: "set", kind: "tool", server: "fx-once", tool: "set_value", arguments: { key: "k-once", value: marker } },
      { id: "after", kind: "code", needs: ["set"], handler: "echo", input: "${steps.set.output}" },
    ],
  };
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const run = await world.settled(((await world.client.startRun({ definition: "result-once" })).run as RunAnswer).id);
  expect(run.status).toBe("succeeded");
  // runs.get shows the tool's output, and the downstream step read it (resolved from its receipt).
  expect(run.result).toEqual({ set: { key: "k-once", value: marker }, after: { key: "k-once", value: marker } });

  const journal = await readJournal(world.nc, 32, RUN_KIND, run.id);
  expect(journal.outcome).toBe("read");
  if (journal.outcome !== "read") return;
  const facts = journal.entries.map((e) => (e.record.journal ?? []) as { t: string; node?: string; key?: string; receipt?: string; value?: unknown }[]);
  // The tool step's result: one write holding its receipt and its output.
  const write = facts.find((f) => f.some((x) => x.t === "output" && x.node === "set"))!;
  const receipt = write.find((x) => x.t === "receipt")!;
  expect(receipt).toMatchObject({ state: "observed", value: { key: "k-once", value: marker } });
  expect(write.find((x) => x.t === "output" && x.node === "set")).toEqual({ t: "output", node: "set", receipt: receipt.key });
  expect(count(JSON.stringify(write), marker)).toBe(1);
  // The downstream echo's output is its own value (a handler's result, no receipt).
  expect(facts.flat().find((x) => x.t === "output" && x.node === "after")).toEqual({ t: "output", node: "after", value: { key: "k-once", value: marker } });

  // The trajectory's step line shows the output as before.
  const trajectory = await world.client.trajectory(run.id);
  const lines = trajectory.lines as { kind: string; node?: string; output?: unknown; state?: string; result?: unknown }[];
  expect(lines.find((l) => l.kind === "step" && l.node === "set")?.output).toEqual({ key: "k-once", value: marker });
  expect(lines.find((l) => l.kind === "tool_call")).toMatchObject({ state: "observed" });

  // A replay answers from the receipts and meets the same outputs.
  const replayed = await world.client.replay(run.id);
  expect(replayed).toMatchObject({ outcome: "replayed", status: "succeeded", identical: true });
});
