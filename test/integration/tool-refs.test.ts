import { afterAll, beforeAll, expect, it } from "vitest";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * A workflow's refs on a real node and a real MCP server (seed 004, "What a workflow run
 * produces"; C074): a tool node that declares an `item_kind` and whose live class is a write adds
 * one ref per returned row with an id; reads, failures and rows without an id add none; the run
 * keeps declaration order and each (kind, id) once.
 */
const world = workflowWorld({ name: "refs-node" });
let fx: EffectsServerHandle;

type View = RunAnswer & { refs?: { kind: string; id: string }[] };

beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  // The same server twice: its `answer` tool is a write through one name and a read through the other (the operator's word).
  for (const [name, cls] of [
    ["crm", "non_idempotent"],
    ["look", "read_only"],
  ])
    expect((await world.client.putToolServer({ name, transport: { type: "http", url: fx.url }, overrides: { answer: cls } })).outcome).toBe("saved");
});

afterAll(async () => {
  await fx?.stop();
});

it("C074 successful write tools add ordered, unique refs; reads, failures and rows without an id add none", async () => {
  const write = (id: string, structured: object, extra: object = {}) => ({
    id,
    kind: "tool",
    server: "crm",
    tool: "answer",
    arguments: { structured },
    ...extra,
  });
  const put = await world.client.putDefinition({
    name: "refs",
    nodes: [
      write("one", { id: "L1", name: "Ada" }, { item_kind: "lead" }),
      { id: "read", kind: "tool", server: "look", tool: "answer", arguments: { structured: { id: "L9" } }, item_kind: "lead" },
      write("list", { items: [{ id: "L2" }, { name: "no id" }, { id: "L1" }] }, { item_kind: "lead" }),
      { id: "broken", kind: "tool", server: "crm", tool: "fail", item_kind: "lead", continue_on_error: true },
      write("undeclared", { id: "L7" }),
      // A task's result, polled later, and an output stored by reference (over the inline bound): their refs too.
      { id: "task", kind: "tool", server: "crm", tool: "slow_task", arguments: { ms: 50, id: "T1" }, item_kind: "lead" },
      write("big", { id: "B1", pad: "x".repeat(40_000) }, { item_kind: "lead" }),
      write("deal", { id: "L1" }, { item_kind: "deal" }),
    ],
  });
  expect(put.outcome, JSON.stringify(put)).toBe("published");
  const id = ((await world.client.startRun({ definition: "refs" })).run as View).id;
  const done = (await world.settled(id)) as View;
  expect(done.status, JSON.stringify(done.error)).toBe("succeeded");
  expect(done.nodes.broken!.status).toBe("failed");
  expect(done.refs).toEqual([
    { kind: "lead", id: "L1" },
    { kind: "lead", id: "L2" },
    { kind: "lead", id: "T1" },
    { kind: "lead", id: "B1" },
    { kind: "deal", id: "L1" },
  ]);
});
