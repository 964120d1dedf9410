import { expect, it } from "vitest";
import { callThroughJournal, type ToolCall } from "../../actors/run/tool-step.js";
import type { ToolCallOutcome, ToolLookup, ToolPort } from "../../actors/run/tool-calls.js";
import type { EffectAnswer } from "../../actors/run/protocol.js";
import type { ExecuteRequest, ToolClass } from "../../machines/index.js";

/**
 * The tool step on its own, with the gateway and the run answered in memory: the real paths that
 * produce `metering_unavailable` (a platform stop) and a write's refs (C074).
 */
function request(over: Partial<ExecuteRequest> = {}): ExecuteRequest {
  return {
    run: "t_r",
    root: "t_r",
    tenant: "t",
    node: "n",
    attempt: 1,
    lease_epoch: 1,
    handler: "tool:crm/create",
    input: {},
    timeout_ms: 5_000,
    cancellation_epoch: 0,
    ticket: "k",
    lease_after_ms: 1_000,
    ...over,
  };
}

function world(opts: { cls?: ToolClass; cost?: number; called?: ToolCallOutcome; claim?: unknown; meter?: "down" | "none" }) {
  const asked: string[] = [];
  const calls: unknown[] = [];
  const tools: ToolPort = {
    lookup: async (): Promise<ToolLookup> => ({ outcome: "found", class: opts.cls ?? "non_idempotent", ...(opts.cost ? { cost_cents: opts.cost } : {}) }),
    call: async (r) => (calls.push(r.arguments), opts.called ?? { outcome: "ok", result: { structuredContent: { id: "L1" } }, bytes: 20 }),
    pollTask: async () => ({ outcome: "working" }),
    cancelTask: async () => undefined,
  };
  const deps = {
    tools,
    ask: async (_r: ExecuteRequest, event: { type: string }): Promise<EffectAnswer | undefined> => {
      asked.push(event.type);
      return opts.claim !== undefined ? { outcome: "observed", value: opts.claim } : { outcome: "recorded" };
    },
    bounded: async (_r: unknown, value: unknown) => value,
    now: () => 1,
    ...(opts.meter === "down" ? { meter: { charge: () => Promise.reject(new Error("meter did not answer")) } } : {}),
  };
  return { deps, asked, calls };
}

const call: ToolCall = { server: "crm", tool: "create", arguments: { name: "Ada" } };
const signal = new AbortController().signal;

it("metering_unavailable is a real path: a priced call whose meter does not answer (or with no meter) fails retryable, before any intent or call", async () => {
  for (const meter of ["down", "none"] as const) {
    const w = world({ cost: 5, meter });
    const { answer } = await callThroughJournal(w.deps, request(), call, signal);
    expect(answer, meter).toMatchObject({ outcome: "failed", error: { code: "metering_unavailable", retryable: true } });
    expect(w.asked, meter).toEqual([]);
    expect(w.calls, meter).toEqual([]);
  }
});

it("C074 a tool node's successful write reports its refs; a read, a failed call, a handler's call and a node with no item_kind report none; a completed claim reports the stored response's", async () => {
  const node = request({ tool: { server: "crm", tool: "create", item_kind: "lead" } });
  const write = await callThroughJournal(world({}).deps, node, call, signal);
  expect(write.answer).toEqual({ outcome: "succeeded", output: { id: "L1" }, refs: [{ kind: "lead", id: "L1" }] });
  expect((await callThroughJournal(world({ cls: "read_only" }).deps, node, call, signal)).answer).not.toHaveProperty("refs");
  const failed = await callThroughJournal(
    world({ called: { outcome: "ok", result: { isError: true, structuredContent: { id: "L1" } }, bytes: 9 } }).deps,
    node,
    call,
    signal,
  );
  expect(failed.answer).toMatchObject({ outcome: "failed", error: { code: "tool_error" } });
  expect(failed.answer).not.toHaveProperty("refs");
  expect((await callThroughJournal(world({}).deps, request(), call, signal)).answer).not.toHaveProperty("refs");
  expect((await callThroughJournal(world({}).deps, request({ tool: { server: "crm", tool: "create" } }), call, signal)).answer).not.toHaveProperty("refs");
  const claimed = await callThroughJournal(world({ claim: { items: [{ id: "L2" }, { id: "L3" }] } }).deps, node, call, signal);
  expect(claimed.answer).toMatchObject({
    outcome: "succeeded",
    refs: [
      { kind: "lead", id: "L2" },
      { kind: "lead", id: "L3" },
    ],
  });
});
