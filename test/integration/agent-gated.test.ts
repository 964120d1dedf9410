import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { startModelFake, type ModelFakeHandle } from "../fixtures/models/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Issue 38 acceptance 3: an agent's gated proposal parks its run on an approval of the existing
 * `tool` kind (no attempt, no model call held); approved (or edited), the tool is called with the
 * decision's arguments and its result goes back to the model; rejected, the model reads the
 * refusal and the loop goes on; a turn's later gated proposals are superseded (one inbox item).
 */

const world = workflowWorld({ name: "agent-gated" });
let fx: EffectsServerHandle;
let openai: ModelFakeHandle;

type View = RunAnswer & { waiting: { on: string; ref: string } | null };
type Item = { id: string; kind: string; node: string; prompt: string; group: string | null; payload: Record<string, unknown> };
type Line = { kind: string; turn?: number; tool?: string; state?: string; arguments?: unknown };
type Request = { body: { messages: { role: string; content?: unknown; tool_call_id?: string }[] } };

const view = async (id: string) => (await world.client.getRun(id)).run as View;
const inbox = async (run: string) => ((await world.client.approvals({ run_id: run })).approvals as Item[]) ?? [];
const requests = async () => (await openai.requests()) as { count: number; requests: Request[] };
/** The tool messages of the model request `i` (what the model was told each call did). */
const toolMessages = async (i: number) => (await requests()).requests[i]!.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content));

/** Charges are gated by name, set_value by class (idempotent); get_value (read-only) is not. */
const DEFINITION = {
  name: "agent-gated",
  approvals: { tools: ["fx/charge"], classes: ["idempotent"], group: "finance", prompt: "Let the agent do this?" },
  nodes: [
    {
      id: "ask",
      kind: "agent",
      model: "oa/fake-gpt",
      instructions: "Use the tools.",
      input: "${input.question}",
      tools: ["fx/charge", "fx/set_value", "fx/get_value"],
    },
  ],
};

beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  openai = await startModelFake("openai", []);
  const c = world.client;
  // Trusted: the server's annotations count (charge non-idempotent, set_value idempotent, get_value read-only).
  expect((await c.putToolServer({ name: "fx", transport: { type: "http", url: fx.url }, trusted: true })).outcome).toBe("saved");
  expect((await c.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl, api_key: "sk-test" })).outcome).toBe("created");
  expect((await c.putDefinition(DEFINITION)).outcome).toMatch(/published|unchanged/);
  const capped = { ...DEFINITION, name: "agent-gated-capped", nodes: [{ ...DEFINITION.nodes[0]!, max_turns: 3 }] };
  expect((await c.putDefinition(capped)).outcome).toMatch(/published|unchanged/);
}, 60_000);
afterAll(async () => {
  await fx?.stop();
  await openai?.stop();
});

/** Starts a run and waits until it is parked on `approval` (its attempt ended, no model call in flight). */
async function parked(question: string, approval: (id: string) => string): Promise<{ id: string; approval: string }> {
  const id = ((await world.client.startRun({ definition: "agent-gated", input: { question } })).run as RunAnswer).id;
  const ref = approval(id);
  await waitFor(async () => ((await view(id)).waiting?.ref === ref ? true : undefined), { timeoutMs: 20_000, describe: `the run to wait on ${ref}` });
  await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 5_000, describe: "the parked attempt to end" });
  expect((await view(id)).status).toBe("waiting");
  return { id, approval: ref };
}

const charge = (account: string, amount: number) => ({ name: "fx__charge", arguments: { account, amount } });
/** The charges the server made for run `id`, as it remembers them by effect key. */
const chargesOf = (id: string) =>
  Object.entries(fx.counts().values)
    .filter(([k]) => k.startsWith(`charge:${id}:`))
    .map(([, v]) => JSON.parse(v) as { account: string; amount: number });

describe("agent node: gated proposals", () => {
  it("C040 38.3 a gated proposal parks the run on one tool approval (no attempt or model call held); approved with edited arguments, the tool receives the edit and its result goes back to the model", async () => {
    await openai.script([
      { reply: { tool_calls: [charge("acme", 30)], usage: { input_tokens: 10, output_tokens: 5 } } },
      { reply: { text: "Charged acme 12.", usage: { input_tokens: 20, output_tokens: 5 } } },
    ]);
    await openai.reset();
    const calls = fx.counts().calls.charge ?? 0;
    const { id, approval } = await parked("Charge acme.", (r) => `${r}:ask:turn0:approval.fx/charge`);
    // Parked: one model turn asked, the call not made, one inbox item of the gated-tool kind.
    expect((await requests()).count).toBe(1);
    expect(fx.counts().calls.charge ?? 0).toBe(calls);
    expect(await inbox(id)).toEqual([
      expect.objectContaining({
        id: approval,
        kind: "tool",
        node: "ask",
        prompt: "Let the agent do this?",
        group: "finance",
        payload: { server: "fx", tool: "charge", arguments: { account: "acme", amount: 30 }, turn: 0 },
      }),
    ]);
    expect(await world.client.decide(approval, "edit", { by: "alice", payload: { account: "acme", amount: 12 } })).toEqual({
      outcome: "decided",
      approval,
      decision: "edited",
    });
    const done = await world.settled(id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ ask: "Charged acme 12." });
    // The server received the reviewer's arguments, once; the model read the call's result; turn 0 was not asked again
    // (C040: asked again, the model would have proposed nothing, its script's next answer being text: the call is made from the journal).
    expect(fx.counts().calls.charge).toBe(calls + 1);
    expect(chargesOf(id)).toEqual([{ account: "acme", amount: 12, charge_no: expect.any(Number) }]);
    expect((await requests()).count).toBe(2);
    expect((await toolMessages(1)).join("\n")).toContain('"amount":12');
    expect(await inbox(id)).toEqual([]);
    const lines = (await world.client.trajectory(id)).lines as Line[];
    expect(lines.filter((l) => l.kind === "model_turn").map((l) => l.turn)).toEqual([0, 1]);
    expect(lines.filter((l) => l.kind === "tool_call").map((l) => [l.tool, l.arguments, l.state])).toEqual([
      ["charge", { account: "acme", amount: 12 }, "observed"],
    ]);
  });

  it("38 runs.replay of an agent run: its turns, its edited gated call and its read call are answered from the original's journal; identical, with no model request and no tool call made", async () => {
    await openai.script([
      { reply: { tool_calls: [{ name: "fx__get_value", arguments: { key: "replayed" } }], usage: { input_tokens: 10, output_tokens: 5 } } },
      { reply: { tool_calls: [charge("acme", 50)], usage: { input_tokens: 15, output_tokens: 5 } } },
      { reply: { text: "Charged acme 5.", usage: { input_tokens: 20, output_tokens: 5 } } },
    ]);
    await openai.reset();
    const { id, approval } = await parked("Read, then charge acme.", (r) => `${r}:ask:turn1:approval.fx/charge`);
    expect((await world.client.decide(approval, "edit", { by: "alice", payload: { account: "acme", amount: 5 } })).outcome).toBe("decided");
    const done = await world.settled(id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    const asked = (await requests()).count;
    const calls = { ...fx.counts().calls };
    expect(asked).toBe(3);

    const replayed = await world.client.replay(id, 20_000);
    expect(replayed, JSON.stringify(replayed)).toMatchObject({ outcome: "replayed", original: id, status: "succeeded", identical: true });
    // Nothing left the node: the model was not asked and no tool was called.
    expect((await requests()).count).toBe(asked);
    expect(fx.counts().calls).toEqual(calls);
    const lines = (await world.client.trajectory(String(replayed.replay))).lines as Line[];
    expect(lines.filter((l) => l.kind === "model_turn").map((l) => l.turn)).toEqual([0, 1, 2]);
    expect(lines.filter((l) => l.kind === "tool_call").map((l) => [l.tool, l.arguments, l.state])).toEqual([
      ["get_value", { key: "replayed" }, "observed"],
      ["charge", { account: "acme", amount: 5 }, "observed"],
    ]);
  });

  it("38.3 rejected: the next turn's request carries the refusal (the reviewer and the reason) as the tool's result, and the run goes on to success", async () => {
    await openai.script([
      { reply: { tool_calls: [charge("acme", 900)], usage: { input_tokens: 10, output_tokens: 5 } } },
      { reply: { text: "Not charged: the reviewer refused.", usage: { input_tokens: 20, output_tokens: 5 } } },
    ]);
    await openai.reset();
    const calls = fx.counts().calls.charge ?? 0;
    const { id, approval } = await parked("Charge acme a lot.", (r) => `${r}:ask:turn0:approval.fx/charge`);
    expect(await world.client.decide(approval, "reject", { by: "bob", reason: "too expensive" })).toEqual({
      outcome: "decided",
      approval,
      decision: "rejected",
    });
    const done = await world.settled(id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ ask: "Not charged: the reviewer refused." });
    expect(fx.counts().calls.charge ?? 0).toBe(calls);
    expect((await requests()).count).toBe(2);
    const told = await toolMessages(1);
    expect(told).toHaveLength(1);
    expect(told[0]).toContain("approval_rejected");
    expect(told[0]).toContain("bob");
    expect(told[0]).toContain("too expensive");
    // A decided approval is not decided twice.
    expect((await world.client.decide(approval, "approve", { by: "carol" })).outcome).toMatch(/already_decided|run_not_waiting/);
  });

  it("38.3 two gated proposals in one turn: one inbox item; the other is superseded (the model is told to ask again) and asks in a later turn", async () => {
    await openai.script([
      {
        reply: {
          tool_calls: [
            { name: "fx__get_value", arguments: { key: "two-gated" } },
            charge("two", 5),
            { name: "fx__set_value", arguments: { key: "two-gated", value: "first" } },
          ],
          usage: { input_tokens: 10, output_tokens: 5 },
        },
      },
      { reply: { tool_calls: [{ name: "fx__set_value", arguments: { key: "two-gated", value: "again" } }], usage: { input_tokens: 20, output_tokens: 5 } } },
      { reply: { text: "Both done.", usage: { input_tokens: 30, output_tokens: 5 } } },
    ]);
    await openai.reset();
    const sets = fx.counts().effects.set_value ?? 0;
    const { id, approval } = await parked("Charge and set.", (r) => `${r}:ask:turn0:approval.fx/charge`);
    expect((await inbox(id)).map((a) => a.id)).toEqual([approval]);
    expect((await world.client.decide(approval, "approve", { by: "alice" })).outcome).toBe("decided");
    // Turn 0's set_value was superseded, never called; turn 1 proposes it again and asks on its own.
    const second = `${id}:ask:turn1:approval.fx/set_value`;
    await waitFor(async () => ((await view(id)).waiting?.ref === second ? true : undefined), { timeoutMs: 20_000, describe: "turn 1's approval" });
    expect((await inbox(id)).map((a) => a.id)).toEqual([second]);
    expect(fx.counts().effects.set_value ?? 0).toBe(sets);
    const told = await toolMessages(1);
    expect(told).toHaveLength(3);
    expect(told[2]).toContain("superseded: ask again after the pending decision");
    expect(chargesOf(id)).toEqual([{ account: "two", amount: 5, charge_no: expect.any(Number) }]);
    expect((await world.client.decide(second, "approve", { by: "alice" })).outcome).toBe("decided");
    const done = await world.settled(id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(fx.counts().effects.set_value).toBe(sets + 1);
    expect(fx.counts().values["two-gated"]).toBe("again");
    expect((await requests()).count).toBe(3);
  });

  it("38.3 bad input on a decision: an unknown approval id and an edit that fails the tool's input schema get typed answers, and nothing is written", async () => {
    await openai.script([
      { reply: { tool_calls: [charge("typed", 3)], usage: { input_tokens: 10, output_tokens: 5 } } },
      { reply: { text: "Done.", usage: { input_tokens: 20, output_tokens: 5 } } },
    ]);
    await openai.reset();
    const { id, approval } = await parked("Charge typed.", (r) => `${r}:ask:turn0:approval.fx/charge`);
    expect((await world.client.decide(`${id}:ask:turn7:approval.fx/charge`, "approve", { by: "alice" })).outcome).toBe("run_not_waiting");
    expect((await world.client.decide("nosuchrun:ask:turn0:approval.fx/charge", "approve", { by: "alice" })).outcome).toBe("approval_not_found");
    const bad = await world.client.decide(approval, "edit", { by: "alice", payload: { account: 5 } });
    expect(bad.outcome).toBe("invalid_input");
    expect(typeof bad.reason).toBe("string");
    // Still the one pending request, untouched.
    expect((await inbox(id)).map((a) => a.id)).toEqual([approval]);
    expect((await view(id)).status).toBe("waiting");
    expect((await world.client.decide(approval, "edit", { by: "alice", payload: { account: "typed", amount: 4 } })).outcome).toBe("decided");
    const done = await world.settled(id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(chargesOf(id)).toEqual([{ account: "typed", amount: 4, charge_no: expect.any(Number) }]);
  });
  it("C131 C082 a run parked three times cannot spend max_turns three times: each attempt after a park gets the remainder, and its first model request carries exactly one system message", async () => {
    await openai.script([
      { reply: { tool_calls: [charge("a1", 1)], usage: { input_tokens: 10, output_tokens: 5 } } },
      { reply: { tool_calls: [charge("a2", 1)], usage: { input_tokens: 10, output_tokens: 5 } } },
      { reply: { tool_calls: [charge("a3", 1)], usage: { input_tokens: 10, output_tokens: 5 } } },
      { reply: { text: "never asked", usage: { input_tokens: 10, output_tokens: 5 } } },
    ]);
    await openai.reset();
    const id = ((await world.client.startRun({ definition: "agent-gated-capped", input: { question: "Charge three." } })).run as RunAnswer).id;
    for (const turn of [0, 1, 2]) {
      const ref = `${id}:ask:turn${turn}:approval.fx/charge`;
      await waitFor(async () => ((await view(id)).waiting?.ref === ref ? true : undefined), { timeoutMs: 20_000, describe: `the run to wait on ${ref}` });
      expect((await world.client.decide(ref, "approve", { by: "alice" })).outcome).toBe("decided");
    }
    const done = await world.settled(id);
    expect(done.status, JSON.stringify(done)).toBe("failed");
    expect(done.nodes.ask!.error?.code).toBe("limit_reached");
    // Three turns in all across four attempts: none asked twice, the fourth never asked.
    const asked = (await requests()).requests;
    expect(asked).toHaveLength(3);
    expect(chargesOf(id).map((c) => c.account)).toEqual(["a1", "a2", "a3"]);
    // Every request (the first of each attempt after a park included) has one system message: the instructions.
    for (const r of asked) expect(r.body.messages.filter((m) => m.role === "system").map((m) => m.content)).toEqual(["Use the tools."]);
  });
});
