import { describe, expect, it } from "vitest";
import type { AnyMachineSnapshot } from "xstate";
import { attemptSpanId, chatSpan, parseTraceparent, runSpanId, runSpanObserver, traceIdOf, type SpanRecord } from "../../actors/run/spans.js";
import type { ExecuteRequest } from "../../machines/index.js";
import { runActor } from "../../actors/index.js";

const snap = (value: string, run: unknown) => ({ value, context: { run } }) as unknown as AnyMachineSnapshot;
const address = { kind: "run", id: "r1" };

function runOf(status: string, node: Record<string, unknown>) {
  return {
    id: "r1",
    tenant: "t",
    root_run_id: "r1",
    parent_run_id: null,
    parent_node: null,
    definition: { name: "wf", version: 1, digest: "d" },
    lifecycle: { status },
    created_at: 1_000,
    error: null,
    nodes: { a: node },
  };
}

describe("trace spans", () => {
  it("reads a W3C traceparent and ignores a malformed one", () => {
    expect(parseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")).toEqual({
      trace_id: "0af7651916cd43dd8448eb211c80319c",
      span_id: "b7ad6b7169203331",
      flags: 1,
    });
    for (const bad of [
      undefined,
      "",
      "00-xyz",
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ])
      expect(parseTraceparent(bad)).toBeUndefined();
  });

  it("C118 an attempt lost with its node is closed with an error status by the transition that failed it worker_lost", () => {
    const spans: SpanRecord[] = [];
    const observe = runSpanObserver({ emit: (s) => spans.push(s) });
    const step = { status: "ready", attempt: 0, lease_epoch: 0, not_before: null, last_error: null, started_at: null, ended_at: null };
    const before = runOf("running", { s: "active", step, offered: 1, offered_at: 1_500 });
    const lost = { code: "worker_lost", message: "the node running this attempt stopped", retryable: true };
    const after = runOf("running", { s: "active", step: { ...step, attempt: 1, lease_epoch: 1, last_error: lost }, offered: 2, offered_at: 9_000 });
    observe(address, snap("running", before), snap("running", after), { type: "run.recover", now: 9_000 } as never);
    expect(spans).toHaveLength(1);
    expect(spans[0]).toMatchObject({ name: "step a", parent_span_id: runSpanId("r1"), trace_id: traceIdOf("r1"), start: 1_500, end: 9_000 });
    expect(spans[0]!.error).toContain("worker_lost");
    // The run's own span when it ends.
    observe(address, snap("running", after), snap("succeeded", { ...after, lifecycle: { status: "succeeded" } }), { type: "step.result", now: 9_500 } as never);
    expect(spans[1]).toMatchObject({ name: "run wf", span_id: runSpanId("r1"), start: 1_000, end: 9_500 });
    expect(spans[1]!.parent_span_id).toBeUndefined();
  });

  it("C118 a lease that lapsed (its timer) closes the attempt's span; a child run's span is invoke_agent under its parent's; a step's own result closes none", () => {
    const spans: SpanRecord[] = [];
    const observe = runSpanObserver({ emit: (s) => spans.push(s) });
    const lost = { code: "worker_lost", message: "the attempt's lease expired without a heartbeat", retryable: true };
    const leased = { status: "leased", attempt: 2, lease_epoch: 2, not_before: null, last_error: null, started_at: 1_200, ended_at: null };
    const before = {
      ...runOf("running", { s: "active", step: leased, lease_expires_at: 5_000, offered_at: 3_000 }),
      parent_run_id: "p1",
      parent_node: "sub",
      root_run_id: "p1",
    };
    const failed = { ...leased, status: "failed", last_error: lost, ended_at: 6_000 };
    const after = {
      ...before,
      lifecycle: { status: "failed" },
      error: { code: "node_failed", message: "a failed" },
      nodes: { a: { s: "failed", step: failed } },
    };
    // The same change under a step's own result: its executor emitted the span, nothing here.
    observe(address, snap("running", before), snap("running", { ...before, nodes: { a: { s: "failed", step: failed } } }), {
      type: "step.result",
      now: 6_000,
    } as never);
    expect(spans).toEqual([]);
    observe(address, snap("running", before), snap("failed", after), { type: "timer.fired", now: 6_000 } as never);
    expect(spans.map((s) => s.name)).toEqual(["step a", "invoke_agent wf"]);
    expect(spans[0]).toMatchObject({ span_id: attemptSpanId("r1", "a", undefined, 2), trace_id: traceIdOf("p1"), start: 3_000, end: 6_000 });
    expect(spans[0]!.attributes["error.type"]).toBe("worker_lost");
    expect(spans[1]).toMatchObject({ parent_span_id: runSpanId("p1"), trace_id: traceIdOf("p1"), end: 6_000, error: "node_failed: a failed" });
    expect(spans[1]!.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_agent", "runway.parent.run.id": "p1" });
  });

  it("a model call's span: chat under the attempt's, with the GenAI attributes; a failed call is an error", () => {
    const request = { run: "r1", root: "r1", tenant: "t", node: "ask", attempt: 3 } as ExecuteRequest;
    const ok = chatSpan(request, { model: "oa/gpt-x", provider: "openai", seq: 0 }, 10, 20, {
      outcome: "ok",
      response: { model: "gpt-x-2026", stop_reason: "end_turn", usage: { input_tokens: 5, output_tokens: 2 } },
    });
    expect(ok).toMatchObject({ name: "chat gpt-x", parent_span_id: attemptSpanId("r1", "ask", undefined, 3), kind: "client", start: 10, end: 20 });
    expect(ok.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-x",
      "gen_ai.response.model": "gpt-x-2026",
      "gen_ai.usage.input_tokens": 5,
      "gen_ai.usage.output_tokens": 2,
    });
    expect(ok.error).toBeUndefined();
    const failed = chatSpan(request, { model: "oa/gpt-x", provider: undefined, seq: 1 }, 30, 40, {
      outcome: "failed",
      failure: { code: "rate_limited", message: "slow down" },
    });
    expect(failed.span_id).not.toBe(ok.span_id);
    expect(failed.error).toBe("rate_limited: slow down");
    expect(failed.attributes).toMatchObject({ "gen_ai.provider.name": "oa", "error.type": "rate_limited" });
  });

  it("tracing off: the run actor has no observer, so the host keeps nothing per transition; on: it has one", () => {
    const deps = {
      planOf: () => Promise.reject(new Error("not asked")),
      parentOf: () => Promise.resolve(null),
      memories: { of: () => Promise.reject(new Error("not asked")), stored: () => undefined, forget: () => undefined },
    };
    expect(runActor(deps, {}).observe).toBeUndefined();
    expect(typeof runActor(deps, { spans: { emit: () => undefined } }).observe).toBe("function");
  });

  it("C118 a child the sweep ends parent_gone has the spans of its attempts in flight closed with its error, with its own span", () => {
    const spans: SpanRecord[] = [];
    const observe = runSpanObserver({ emit: (s) => spans.push(s) });
    const leased = { status: "leased", attempt: 1, lease_epoch: 1, not_before: null, last_error: null, started_at: 1_100, ended_at: null };
    const before = { ...runOf("running", { s: "active", step: leased, lease_expires_at: 9_000 }), parent_run_id: "p1", parent_node: "sub", root_run_id: "p1" };
    const error = { code: "parent_gone", message: "parent run p1 is failed (recovery sweep)" };
    const after = { ...before, lifecycle: { status: "failed" }, error, nodes: { a: { s: "cancelled", step: leased } } };
    observe(address, snap("running", before), snap("failed", after), { type: "run.parent_gone", now: 7_000 } as never);
    expect(spans.map((s) => [s.name, s.end, s.error])).toEqual([
      ["step a", 7_000, "parent_gone: parent run p1 is failed (recovery sweep)"],
      ["invoke_agent wf", 7_000, "parent_gone: parent run p1 is failed (recovery sweep)"],
    ]);
    expect(spans[0]).toMatchObject({ span_id: attemptSpanId("r1", "a", undefined, 1), start: 1_100, parent_span_id: runSpanId("r1") });
  });
});
