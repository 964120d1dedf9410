import { describe, expect, it } from "vitest";
import type { AnyMachineSnapshot } from "xstate";
import { parseTraceparent, runSpanId, runSpanObserver, traceIdOf, type SpanRecord } from "../../actors/run/spans.js";

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
});
