import { describe, expect, it } from "vitest";
import { answerToolCall } from "../../runtime/pool/tool-calls.js";
import type { TaskRef } from "../../runtime/pool/task.js";
import { WIRE_VERSION, type ToolAnswerMessage, type ToolCallMessage } from "../../runtime/pool/wire.js";

const call: ToolCallMessage = { t: "tool_call", v: WIRE_VERSION, seq: 7, id: 11, server: "crm", tool: "refund", arguments: { order: "o1" } };
const ref: TaskRef = { handler: "h", runId: "r", stepId: "s", attempt: 2, leaseEpoch: 3 };

/** Answers the call and waits for the one answer posted back to the thread. */
function answer(running: TaskRef | undefined, gateway: Parameters<typeof answerToolCall>[2]): Promise<ToolAnswerMessage> {
  return new Promise((resolve) => answerToolCall(call, running, gateway, resolve));
}

describe("a handler's tool call, answered by the pool (runtime/pool/tool-calls.ts)", () => {
  it("passes the running attempt and the call to the gateway, and posts its answer back under the call's seq and id", async () => {
    const seen: unknown[] = [];
    const posted = await answer(ref, async (r, c) => (seen.push(r, c), { outcome: "succeeded" as const, output: { refunded: true } }));
    expect(seen).toEqual([ref, { server: "crm", tool: "refund", arguments: { order: "o1" } }]);
    expect(posted).toEqual({ t: "tool_answer", v: WIRE_VERSION, seq: 7, id: 11, answer: { outcome: "succeeded", output: { refunded: true } } });
  });

  it("tells a step that is no longer running that it stopped, without asking the gateway", async () => {
    let asked = false;
    const posted = await answer(undefined, async () => ((asked = true), { outcome: "stopped" as const, reason: "x" }));
    expect(posted.answer).toEqual({ outcome: "stopped", reason: "attempt_not_running" });
    expect(asked).toBe(false);
  });

  it("answers a retryable failure when the pool has no gateway, or the gateway throws", async () => {
    expect((await answer(ref, undefined)).answer).toEqual({
      outcome: "failed",
      error: { code: "tool_gateway_unavailable", message: "this pool has no tool gateway", retryable: true },
    });
    expect((await answer(ref, () => Promise.reject(new Error("gateway down")))).answer).toEqual({
      outcome: "failed",
      error: { code: "tool_gateway_error", message: "gateway down", retryable: true },
    });
  });
});
