import { afterAll, beforeAll, expect, it } from "vitest";
import { waitFor } from "../harness/index.js";
import { startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { A2ACaller } from "../../gateways/index.js";
import { SendMessageRequest, TaskState, type Task } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Issue 39 §2, input-required: two deployments (two NATS servers, one in-process node each).
 * The callee's tenant t1 exposes `gate` (an approval) and `hold` (a wait on a signal whose data
 * has a schema) and `charge` (a tool call whose MCP server asks for input with a form's schema)
 * as public agents; the caller's tenant t1 calls them with `a2a` steps. A remote task that asks
 * for input becomes an inbox item of the calling run.
 */
const callee = workflowWorld({ name: "a2a-callee", http: { port: 0 } });
const caller = workflowWorld({ name: "a2a-caller", http: { port: 0 } });

type Item = {
  id: string;
  run: string;
  kind: string;
  prompt: string;
  payload: { requests: { key: string; message: string }[] };
  input?: { task?: { id: string } };
};

const cards: Record<string, string> = {};
let bank: EffectsServerHandle;

beforeAll(async () => {
  bank = await startModernServer();
  const put = await callee.client.putToolServer({ name: "bank", protocol: "2026-07-28", transport: { type: "http", url: bank.url } });
  expect(put.outcome).toBe("saved");
  const remote = [
    {
      name: "charge",
      nodes: [{ id: "pay", kind: "tool", server: "bank", tool: "confirm_charge", arguments: { account: "${input.account}", amount: 5 } }],
      result: "${steps.pay.output}",
    },
    {
      name: "gate",
      nodes: [
        { id: "gate", kind: "approval", prompt: "Ship it?", payload: "${input}", timeout_ms: 3_600_000 },
        { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
      ],
      result: "${steps.after.output}",
    },
    {
      name: "hold",
      nodes: [
        {
          id: "gate",
          kind: "wait",
          signal: "go",
          timeout_ms: 3_600_000,
          schema: { type: "object", required: ["name"], properties: { name: { type: "string" } }, additionalProperties: false },
        },
        { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
      ],
      result: "${steps.after.output}",
    },
  ];
  for (const def of remote) {
    expect((await callee.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    expect((await callee.client.exposeAgent({ definition: def.name, public: true })).outcome).toBe("exposed");
    cards[def.name] = `${callee.node.httpUrl!}/a2a/t1/${def.name}/.well-known/agent-card.json`;
    const calls = {
      name: `ask-${def.name}`,
      nodes: [{ id: "call", kind: "a2a", agent: cards[def.name], message: "${input}", retry: { max_attempts: 2, backoff_ms: 100, max_backoff_ms: 100 } }],
      result: "${steps.call.output}",
    };
    expect((await caller.client.putDefinition(calls)).outcome).toMatch(/published|unchanged/);
  }
  // The same call, gated: a person approves it before it is sent.
  const gated = {
    name: "ask-gate-gated",
    approvals: { classes: ["idempotent"], prompt: "Call the gate agent?" },
    nodes: [{ id: "call", kind: "a2a", agent: cards.gate, message: "${input}" }],
    result: "${steps.call.output}",
  };
  expect((await caller.client.putDefinition(gated)).outcome).toMatch(/published|unchanged/);
  // A question nobody answers in time: the definition's policy gives requests for input their clock.
  const hurried = {
    name: "ask-gate-hurried",
    approvals: { tools: ["nothing/gated"], timeout_ms: 1_500 },
    nodes: [{ id: "call", kind: "a2a", agent: cards.gate, message: "${input}" }],
    result: "${steps.call.output}",
  };
  expect((await caller.client.putDefinition(hurried)).outcome).toMatch(/published|unchanged/);
}, 60_000);
afterAll(async () => {
  await bank?.stop();
});

async function start(definition: string, input: unknown): Promise<string> {
  return ((await caller.client.startRun({ definition, input })).run as RunAnswer).id;
}

/** The calling run's pending inbox item, other than `not` (a question already answered). */
function itemOf(run: string, not?: string): Promise<Item> {
  return waitFor(async () => ((await caller.client.approvals({ run_id: run })).approvals as Item[]).find((i) => i.id !== not), {
    timeoutMs: 30_000,
    describe: `an inbox item of run ${run}`,
  });
}

async function taskOf(run: string): Promise<string> {
  const events = (await caller.client.runEvents(run)).events as { type: string; task?: string }[];
  return events.find((e) => e.type === "tool_task_started")!.task!;
}

function remoteStatus(task: string, status: string): Promise<true> {
  return waitFor(async () => ((await callee.client.getRun(task)).run as RunAnswer | undefined)?.status === status || undefined, {
    timeoutMs: 30_000,
    describe: `remote task ${task} to be ${status}`,
  });
}

it("39.2 a2a step: the remote task's input-required becomes an inbox item of the calling run; answering it makes the remote task go on and the step succeeds with its result", async () => {
  const run = await start("ask-gate", { release: "1.2" });
  const item = await itemOf(run);
  const task = await taskOf(run);
  expect(item).toMatchObject({ run, node: "call", kind: "input", prompt: "Ship it?", input: { task: { id: task } } });
  expect(item.payload.requests).toEqual([{ key: "reply", message: "Ship it?", schema: {} }]);
  // The remote run waits on its own approval meanwhile.
  expect(((await callee.client.getRun(task)).run as RunAnswer).status).toBe("waiting");
  // A request for input is answered with approve (its content) or reject: an edit is a typed refusal.
  expect(await caller.client.decide(item.id, "edit", { payload: { x: 1 } })).toMatchObject({ outcome: "invalid_input" });
  expect(await caller.client.decide(item.id, "approve", { by: "ada" })).toMatchObject({ outcome: "decided" });
  const done = await caller.settled(run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ task, result: { decision: "approved", payload: { release: "1.2" } } });
  expect(((await callee.client.getRun(task)).run as RunAnswer).status).toBe("succeeded");
  // One remote task for the whole conversation.
  const events = (await caller.client.runEvents(run)).events as { type: string; task?: string }[];
  expect(new Set(events.filter((e) => e.type === "tool_task_started").map((e) => e.task))).toEqual(new Set([task]));
}, 90_000);

it("39.2 a2a step: rejecting the remote question cancels the remote task and fails the step a2a_input_rejected", async () => {
  const run = await start("ask-gate", { release: "1.3" });
  const item = await itemOf(run);
  const task = await taskOf(run);
  expect(await caller.client.decide(item.id, "reject", { reason: "not today" })).toMatchObject({ outcome: "decided" });
  const done = await caller.settled(run);
  expect(done.status).toBe("failed");
  expect(done.nodes.call!.error?.code).toBe("a2a_input_rejected");
  await remoteStatus(task, "cancelled");
}, 90_000);

it("39.2 a2a step bad input: an answer the remote agent refuses is asked again with its reason; a fitting answer completes the step", async () => {
  const run = await start("ask-hold", { order: 7 });
  const first = await itemOf(run);
  const task = await taskOf(run);
  expect(first).toMatchObject({ kind: "input", input: { task: { id: task } } });
  // The remote wait's schema wants {name}: the agent refuses this answer (nothing is signalled).
  expect(await caller.client.decide(first.id, "approve", { payload: { wrong: 1 } })).toMatchObject({ outcome: "decided" });
  const second = await itemOf(run, first.id);
  expect(second.prompt).toMatch(/refused the answer \(a2a_/);
  expect(second).toMatchObject({ kind: "input", input: { task: { id: task } } });
  expect(((await callee.client.getRun(task)).run as RunAnswer).status).toBe("waiting");
  expect(await caller.client.decide(second.id, "approve", { payload: { name: "Ada" } })).toMatchObject({ outcome: "decided" });
  const done = await caller.settled(run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ task, result: { name: "Ada" } });
}, 90_000);

it("39.2 a2a step: cancelling the calling run while its remote question is pending cancels the remote task", async () => {
  const run = await start("ask-gate", { release: "1.4" });
  await itemOf(run);
  const task = await taskOf(run);
  expect((await caller.client.cancelRun(run, "test")).outcome).toMatch(/cancel/);
  await remoteStatus(task, "cancelled");
  expect(((await caller.client.approvals({ run_id: run })).approvals as Item[]).length).toBe(0);
}, 90_000);

it("39.2 a2a step bad input: the remote question's schema (a Runway agent's request for input) is the inbox item's; an answer that does not fit it is refused invalid_input, one that fits reaches the remote tool", async () => {
  const before = bank.counts().effects.confirm_charge ?? 0;
  const run = await start("ask-charge", { account: "alice" });
  const item = await itemOf(run);
  const task = await taskOf(run);
  expect(item).toMatchObject({ kind: "input", prompt: "Charge alice 5?", input: { task: { id: task } } });
  expect(item.payload.requests).toEqual([{ key: "reply", message: "Charge alice 5?", schema: expect.objectContaining({ required: ["ok"] }) }]);
  // Refused before anything is stored or sent: the item stays.
  expect(await caller.client.decide(item.id, "approve", { payload: { ok: "yes" } })).toMatchObject({ outcome: "invalid_input" });
  expect(((await caller.client.approvals({ run_id: run })).approvals as Item[]).map((i) => i.id)).toEqual([item.id]);
  expect(await caller.client.decide(item.id, "approve", { payload: { ok: true, note: "checked" } })).toMatchObject({ outcome: "decided" });
  const done = await caller.settled(run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ task, result: { account: "alice", amount: 5, note: "checked" } });
  expect(bank.counts().effects.confirm_charge ?? 0).toBe(before + 1);
}, 90_000);

it("39.2 a2a step, gated: the call's approval, then the remote task's question; the answer's call keeps the approved arguments and the step succeeds", async () => {
  const run = await start("ask-gate-gated", { release: "2.0" });
  const gate = await itemOf(run);
  expect(gate).toMatchObject({ kind: "tool", prompt: "Call the gate agent?" });
  expect(await caller.client.decide(gate.id, "approve")).toMatchObject({ outcome: "decided" });
  const question = await itemOf(run, gate.id);
  expect(question).toMatchObject({ kind: "input", prompt: "Ship it?" });
  expect(await caller.client.decide(question.id, "approve")).toMatchObject({ outcome: "decided" });
  const done = await caller.settled(run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ result: { decision: "approved", payload: { release: "2.0" } } });
}, 90_000);

it("39.2 a2a step: a remote question nobody answers in time expires: the step fails approval_expired and the remote task is cancelled", async () => {
  const run = await start("ask-gate-hurried", { release: "3.0" });
  await itemOf(run);
  const task = await taskOf(run);
  const done = await caller.settled(run);
  expect(done.status).toBe("failed");
  expect(done.nodes.call!.error?.code).toBe("approval_expired");
  await remoteStatus(task, "cancelled");
}, 90_000);

it("39.2 a2a step: a remote question answered at the remote agent meanwhile: the calling run's answer finds the task ended and the step takes its result", async () => {
  const run = await start("ask-gate", { release: "4.0" });
  const item = await itemOf(run);
  const task = await taskOf(run);
  const remote = await waitFor(async () => ((await callee.client.approvals({ run_id: task })).approvals as Item[])[0], {
    timeoutMs: 30_000,
    describe: "the remote run's own approval",
  });
  expect(await callee.client.decide(remote.id, "approve", { by: "bob" })).toMatchObject({ outcome: "decided" });
  await remoteStatus(task, "succeeded");
  expect(await caller.client.decide(item.id, "approve")).toMatchObject({ outcome: "decided" });
  const done = await caller.settled(run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ task, result: { decision: "approved", by: "bob", payload: { release: "4.0" } } });
}, 90_000);

it("39.2 a2a step: the answer's follow-up message is keyed by the effect key and the question, so sending it twice (a retry after a crash) is taken once", async () => {
  const run = await start("ask-hold", { order: 9 });
  const item = (await itemOf(run)) as Item & { input: { state: string } };
  const task = await taskOf(run);
  const a2a = new A2ACaller();
  const answer = () =>
    a2a.call({
      tenant: "t1",
      server: "a2a:",
      tool: cards.hold!,
      arguments: { order: 9 },
      key: `${run}:call:answer-twice`,
      timeoutMs: 10_000,
      signal: AbortSignal.timeout(10_000),
      allowTask: true,
      input: { responses: { reply: { action: "accept", content: { name: "Bo" } } }, state: item.input.state },
    });
  const first = await answer();
  const second = await answer();
  expect(first.outcome === "task" || first.outcome === "ok").toBe(true);
  expect(second.outcome === "task" || second.outcome === "ok").toBe(true);
  await remoteStatus(task, "succeeded");
  expect(((await callee.client.runEvents(task)).events as { type: string }[]).filter((e) => e.type === "signal_received").length).toBe(1);
  await caller.client.cancelRun(run, "done by hand");
}, 90_000);

it("39.2 a2a steps in a chain: an A2A client of the calling deployment's agent sees the remote agent's question as its own task's input-required, and its follow-up answers it through both", async () => {
  expect((await caller.client.exposeAgent({ definition: "ask-gate", public: true })).outcome).toBe("exposed");
  const client = await new ClientFactory().createFromUrl(`${caller.node.httpUrl!}/a2a/t1/ask-gate/`);
  const send = (parts: unknown[], taskId?: string) =>
    client.sendMessage(
      SendMessageRequest.fromJSON({
        message: { messageId: `chain-${Date.now()}-${Math.random()}`, role: "ROLE_USER", ...(taskId ? { taskId } : {}), parts },
        configuration: { returnImmediately: false },
      }),
    );
  const asked = (await send([{ data: { release: "5.0" } }])) as Task;
  expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
  expect(asked.status?.message?.parts[0]!.content).toEqual({ $case: "text", value: "Ship it?" });
  const done = (await send([{ text: "yes, ship it" }], asked.id)) as Task;
  expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  const outer = await caller.settled(asked.id);
  expect(outer.status).toBe("succeeded");
  expect(outer.result).toMatchObject({ result: { decision: "approved", payload: { release: "5.0" } } });
}, 90_000);
