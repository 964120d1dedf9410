import { afterAll, beforeAll, expect, it } from "vitest";
import { RUN_KIND } from "../../actors/index.js";
import { waitFor } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { readActor } from "../fixtures/read-actor.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Gated tools (issue 11 §2): a tool call a policy gates asks a person before its intent is
 * recorded, waiting on the run's approval record holding no worker, and is made once, with the
 * arguments that record holds.
 */

/** The node's clock, moved forward by the test (a three-day wait without waiting three days). */
let offset = 0;
const world = workflowWorld({ name: "gated-node", clock: { now: () => Date.now() + offset, monotonic: () => performance.now() } });
const DAY = 24 * 3_600_000;
let fx: EffectsServerHandle;

type View = RunAnswer & { waiting: { on: string; ref: string; expires_at: number } | null; partial_reason?: string };
type Item = { id: string; kind: string; node: string; prompt: string; group: string | null; payload: { server: string; tool: string; arguments: unknown } };
const view = async (id: string) => (await world.client.getRun(id)).run as View;
const inbox = async (run: string) => ((await world.client.approvals({ run_id: run })).approvals as Item[]) ?? [];
const charges = () => fx.counts().calls.charge ?? 0;

beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  // Trusted: the server's annotations count, so find_charge is read-only, set_value idempotent and charge non-idempotent.
  expect((await world.client.putToolServer({ name: "pay", transport: { type: "http", url: fx.url }, trusted: true })).outcome).toBe("saved");
  const defs = [
    {
      // By class: every non-idempotent call asks finance first; the read-only lookup does not.
      name: "gated-refund",
      approvals: { classes: ["non_idempotent"], group: "finance", escalation_group: "cfo", prompt: "Charge this account?", timeout_ms: 7 * DAY },
      nodes: [
        { id: "look", kind: "tool", server: "pay", tool: "find_charge", arguments: { effect_key: "none" } },
        { id: "pay", kind: "tool", needs: ["look"], server: "pay", tool: "charge", arguments: { account: "${input.account}", amount: "${input.amount}" } },
      ],
    },
    {
      // By name: set_value is idempotent, gated only because the policy names it.
      name: "gated-by-name",
      approvals: { tools: ["pay/set_value"] },
      nodes: [
        { id: "read", kind: "tool", server: "pay", tool: "get_value", arguments: { key: "by-name" } },
        { id: "put", kind: "tool", needs: ["read"], server: "pay", tool: "set_value", arguments: { key: "by-name", value: "v" } },
      ],
    },
    {
      // A gate that expires after earlier work.
      name: "gated-late",
      nodes: [
        { id: "prep", kind: "code", handler: "echo", input: { account: "${input.account}" } },
        {
          id: "pay",
          kind: "tool",
          needs: ["prep"],
          server: "pay",
          tool: "charge",
          arguments: { account: "${steps.prep.output.account}", amount: 9 },
          approval: { group: "finance", timeout_ms: 300 },
        },
      ],
    },
    {
      // A handler cannot wait for a person mid-handler: its call of a gated tool fails tool_needs_approval.
      name: "gated-handler",
      approvals: { tools: ["pay/fail"] },
      nodes: [{ id: "work", kind: "code", handler: "two_tools", input: { server: "pay" } }],
    },
    {
      // C067: a map item cannot wait for a person; a gated read in it stops the map and its run.
      name: "gated-map",
      approvals: { tools: ["pay/get_value"] },
      nodes: [
        {
          id: "m",
          kind: "map",
          items: "${input.list}",
          handler: "calls_in_order",
          max_fanout: 5,
          concurrency: 1,
          continue_on_error: true,
          retry: { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 10 },
          input: { server: "pay", calls: [{ tool: "get_value", args: { key: "gated-map" } }] },
        },
        { id: "after", kind: "code", handler: "noop", needs: [{ node: "m", when: "always" }] },
      ],
    },
  ];
  for (const def of defs) expect((await world.client.putDefinition(def)).outcome, def.name).toMatch(/published|unchanged/);
}, 30_000);
afterAll(async () => {
  await fx?.stop();
});

/** Starts a run and waits until it waits on its gated call's approval. */
async function gated(definition: string, input: Record<string, unknown>, node = "pay", tool = "pay/charge"): Promise<{ id: string; approval: string }> {
  const id = ((await world.client.startRun({ definition, input })).run as RunAnswer).id;
  const approval = `${id}:${node}:approval.${tool}`;
  await waitFor(async () => ((await view(id)).status === "waiting" ? true : undefined), { timeoutMs: 15_000, describe: "the run to wait on its gated call" });
  expect((await view(id)).waiting).toMatchObject({ on: "approval", ref: approval });
  return { id, approval };
}

it("C119 a gated tool's call waits three days on a person holding no worker, untouched by every sweep pass, listed once for its group (and escalation group); approved, the call executes exactly once", async () => {
  const before = charges();
  const { id, approval } = await gated("gated-refund", { account: "acme", amount: 30 });
  // The run shows `waiting` once its gate is stored, a moment before the attempt that asked it has unwound.
  await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 5_000, describe: "the parked attempt to give its worker back" });
  // The read-only lookup before it ran without asking anyone; the gated call made no call and recorded no intent.
  const waiting = await view(id);
  expect(waiting.nodes.look!.status).toBe("succeeded");
  expect(waiting.nodes.pay!.status).toBe("active");
  expect(charges()).toBe(before);
  const listed = await inbox(id);
  expect(listed).toEqual([
    expect.objectContaining({
      id: approval,
      kind: "tool",
      node: "pay",
      prompt: "Charge this account?",
      group: "finance",
      payload: { server: "pay", tool: "charge", arguments: { account: "acme", amount: 30 } },
    }),
  ]);
  expect(((await world.client.approvals({ group: "cfo" })).approvals as Item[]).map((a) => a.id)).toContain(approval);
  const revision = (await readActor(world.nc, RUN_KIND, id))!.revision;
  for (const later of [3_600_000, DAY, 3 * DAY, 6 * DAY]) {
    const report = await world.node.sweeper.pass(Date.now() + later);
    expect(report.actions.wait_abandoned ?? 0).toBe(0);
    expect(report.actions.reoffer ?? 0).toBe(0);
    expect((await view(id)).status).toBe("waiting");
    expect((await readActor(world.nc, RUN_KIND, id))!.revision).toBe(revision);
  }
  expect(world.node.executor.inFlight).toBe(0);
  offset = 3 * DAY;
  try {
    expect(await world.client.decide(approval, "approve", { by: "alice" })).toEqual({ outcome: "decided", approval, decision: "approved" });
    const done = await world.settled(id);
    expect(done.status).toBe("succeeded");
    expect(done.result).toMatchObject({ pay: { account: "acme", amount: 30 } });
  } finally {
    offset = 0;
  }
  expect(charges()).toBe(before + 1);
  expect(fx.counts().effects.charge).toBeGreaterThanOrEqual(1);
  expect(await world.client.decide(approval, "approve", { by: "bob" })).toEqual({ outcome: "already_decided" });
  expect(await inbox(id)).toEqual([]);
  // Its intent was recorded only after the decision: asked, decided, then recorded and called, once.
  const events = ((await world.client.runEvents(id)).events as { type: string; node?: string }[]).filter((e) => e.node === "pay").map((e) => e.type);
  expect(events.filter((t) => t === "approval_requested" || t === "approval_decided" || t === "effect_intent" || t === "effect_observed")).toEqual([
    "approval_requested",
    "approval_decided",
    "effect_intent",
    "effect_observed",
  ]);
});

it("an edit's changed arguments are what the tool receives; an edit that does not fit the tool's input schema is invalid_input and changes nothing", async () => {
  const { id, approval } = await gated("gated-refund", { account: "acme", amount: 500 });
  const bad = await world.client.decide(approval, "edit", { payload: { account: "acme", amount: "fifty" }, by: "alice" });
  expect(bad.outcome).toBe("invalid_input");
  expect(String(bad.reason)).toContain("amount");
  const missing = await world.client.decide(approval, "edit", { payload: { amount: 5 }, by: "alice" });
  expect(missing.outcome).toBe("invalid_input");
  // Nothing was written: the request is pending and listed as it was, and nobody decided.
  expect((await view(id)).status).toBe("waiting");
  expect((await inbox(id)).map((a) => a.payload.arguments)).toEqual([{ account: "acme", amount: 500 }]);
  expect(((await world.client.runEvents(id)).events as { type: string }[]).map((e) => e.type)).not.toContain("approval_decided");

  const before = fx.counts();
  expect(await world.client.decide(approval, "edit", { payload: { account: "acme", amount: 50 }, by: "alice" })).toEqual({
    outcome: "decided",
    approval,
    decision: "edited",
  });
  const done = await world.settled(id);
  expect(done.status).toBe("succeeded");
  // The server's own answer: the arguments it was called with.
  expect(done.result).toMatchObject({ pay: { account: "acme", amount: 50 } });
  const after = fx.counts();
  expect(after.calls.charge).toBe((before.calls.charge ?? 0) + 1);
  // The call's effect key follows the arguments it was made with.
  const key = after.keys.find((k) => !before.keys.includes(k) && k.startsWith(`${id}:pay:`));
  expect(JSON.parse(after.values[`charge:${key}`]!)).toMatchObject({ account: "acme", amount: 50 });
  const trajectory = JSON.stringify(await world.client.trajectory(id));
  expect(trajectory).toContain('"amount":50');
});

it("rejected: the node fails approval_rejected, the run fails and the tool is never called", async () => {
  const before = charges();
  const { id, approval } = await gated("gated-refund", { account: "evil", amount: 1_000_000 });
  expect(await world.client.decide(approval, "reject", { reason: "no", by: "alice" })).toMatchObject({ outcome: "decided", decision: "rejected" });
  const run = await world.settled(id);
  expect(run.status).toBe("failed");
  expect(run.nodes.pay!.error?.code).toBe("approval_rejected");
  expect(charges()).toBe(before);
  expect(await inbox(id)).toEqual([]);
});

it("a replay follows every journaled decision: a call approved with edited arguments replays identical, making no call; so do a plain approval and a rejection", async () => {
  const edited = await gated("gated-refund", { account: "replay-edit", amount: 500 });
  expect(await world.client.decide(edited.approval, "edit", { payload: { account: "replay-edit", amount: 45 }, by: "alice" })).toMatchObject({
    decision: "edited",
  });
  const approved = await gated("gated-refund", { account: "replay-approve", amount: 7 });
  expect(await world.client.decide(approved.approval, "approve", { by: "alice" })).toMatchObject({ decision: "approved" });
  const rejected = await gated("gated-refund", { account: "replay-reject", amount: 9 });
  expect(await world.client.decide(rejected.approval, "reject", { reason: "no", by: "alice" })).toMatchObject({ decision: "rejected" });
  expect(await world.settled(edited.id)).toMatchObject({ status: "succeeded", result: { pay: { account: "replay-edit", amount: 45 } } });
  expect((await world.settled(approved.id)).status).toBe("succeeded");
  expect((await world.settled(rejected.id)).status).toBe("failed");

  const before = JSON.stringify(fx.counts().calls);
  for (const original of [edited.id, approved.id, rejected.id]) {
    const replayed = await world.client.replay(original);
    expect(replayed, original).toMatchObject({ outcome: "replayed", original, identical: true });
    expect(replayed.divergence, original).toBeUndefined();
    // A replay asks no person.
    expect(await inbox(String(replayed.replay))).toEqual([]);
  }
  // No call of a replay left the node.
  expect(JSON.stringify(fx.counts().calls)).toBe(before);
});

it("C036 C095 a gated tool's approval that expires after earlier work ends the run succeeded with partial_reason approval_expired; the gated call is never made", async () => {
  const before = charges();
  const id = ((await world.client.startRun({ definition: "gated-late", input: { account: "slow" } })).run as RunAnswer).id;
  const run = (await world.settled(id)) as View;
  expect(run.status).toBe("succeeded");
  expect(run.partial_reason).toBe("approval_expired");
  expect(run.error).toBeNull();
  expect(run.nodes.prep!.status).toBe("succeeded");
  expect(run.nodes.pay!.error?.code).toBe("approval_expired");
  expect(charges()).toBe(before);
  expect(await world.client.decide(`${id}:pay:approval.pay/charge`, "approve", { by: "alice" })).toEqual({ outcome: "approval_expired" });
  expect(await inbox(id)).toEqual([]);
});

it("gated by name: a tool the policy names asks first whatever its class, a tool it does not name runs at once", async () => {
  const { id, approval } = await gated("gated-by-name", {}, "put", "pay/set_value");
  expect((await view(id)).nodes.read!.status).toBe("succeeded");
  expect(fx.counts().values["by-name"]).toBeUndefined();
  expect(await world.client.decide(approval, "approve", { by: "alice" })).toMatchObject({ outcome: "decided" });
  expect((await world.settled(id)).status).toBe("succeeded");
  expect(fx.counts().values["by-name"]).toBe("v");
});

it("a handler's call of a gated tool fails tool_needs_approval (it cannot wait for a person mid-handler); its other calls are made", async () => {
  const failsBefore = fx.counts().calls.fail ?? 0;
  const id = ((await world.client.startRun({ definition: "gated-handler" })).run as RunAnswer).id;
  const run = await world.settled(id);
  expect(run.status).toBe("succeeded");
  expect(run.result).toMatchObject({ work: { first: { account: "a", amount: 1 }, failed: "tool_needs_approval" } });
  expect(fx.counts().calls.fail ?? 0).toBe(failsBefore);
});

it("C067 a map item's call of a gated read tool fails the map read_tool_needs_approval at once: the run fails despite continue_on_error, no retry is spent, the tool is never called", async () => {
  const reads = fx.counts().calls.get_value ?? 0;
  const id = ((await world.client.startRun({ definition: "gated-map", input: { list: [1, 2, 3] } })).run as RunAnswer).id;
  const run = await world.settled(id);
  expect(run.status).toBe("failed");
  expect(run.error).toMatchObject({ code: "read_tool_needs_approval" });
  expect(run.nodes.m).toMatchObject({ status: "failed", error: { code: "read_tool_needs_approval" } });
  expect(run.nodes.after!.status).toBe("cancelled");
  expect(fx.counts().calls.get_value ?? 0).toBe(reads);
  // No retry of the item, and no later item ran (one at a time: the first stopped the map).
  const events = (await world.client.runEvents(id)).events as { type: string; node?: string; item?: number }[];
  expect(events.filter((e) => e.type === "step_retrying")).toEqual([]);
  expect(events.filter((e) => e.node === "m" && (e.item ?? 0) > 0)).toEqual([]);
  expect(await inbox(id)).toEqual([]);
});

it("approvals.decide on a gated call answers closed outcomes for ids that name nothing", async () => {
  const { id, approval } = await gated("gated-refund", { account: "x", amount: 1 });
  expect(await world.client.decide(`${id}:pay:approval.pay/refund`, "approve", { by: "alice" })).toEqual({ outcome: "run_not_waiting" });
  // An edit naming a tool the server does not have is refused before anything is stored.
  expect((await world.client.decide(`${id}:pay:approval.pay/refund`, "edit", { payload: {}, by: "alice" })).outcome).toBe("invalid_input");
  expect((await world.client.cancelRun(id)).outcome).toMatch(/cancelled/);
  expect(await world.client.decide(approval, "approve", { by: "alice" })).toEqual({ outcome: "run_not_waiting" });
  expect(await inbox(id)).toEqual([]);
});
