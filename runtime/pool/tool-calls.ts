import type { TaskRef, StepPoolOptions } from "./task.js";
import { WIRE_VERSION, type ToolAnswerMessage, type ToolCallAnswer, type ToolCallMessage } from "./wire.js";

/**
 * A handler's tool call, asked from its thread, answered through the pool's tool gateway
 * (`onToolCall`). The answer goes back to the thread whatever happens: a step that is no longer
 * running is told it stopped, a pool without a gateway or a gateway that throws answer a
 * retryable failure, so the handler's `await` always settles.
 */
export function answerToolCall(
  m: ToolCallMessage,
  running: TaskRef | undefined,
  gateway: StepPoolOptions["onToolCall"],
  post: (answer: ToolAnswerMessage) => void,
): void {
  const reply = (answer: ToolCallAnswer) => post({ t: "tool_answer", v: WIRE_VERSION, seq: m.seq, id: m.id, answer });
  if (!running) return reply({ outcome: "stopped", reason: "attempt_not_running" });
  if (!gateway) return reply({ outcome: "failed", error: { code: "tool_gateway_unavailable", message: "this pool has no tool gateway", retryable: true } });
  gateway(running, { server: m.server, tool: m.tool, arguments: m.arguments }).then(reply, (err: unknown) =>
    reply({ outcome: "failed", error: { code: "tool_gateway_error", message: err instanceof Error ? err.message : String(err), retryable: true } }),
  );
}
