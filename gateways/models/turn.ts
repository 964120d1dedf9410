import type { ModelMessage, ModelToolCall, ModelUsage } from "./types.js";

/** A tool call's argument text, assembled from its streamed pieces, as the response carries it. */
export function toolCall(id: string, name: string, raw: string): ModelToolCall {
  const text = raw.trim();
  if (text === "") return { id, name, arguments: {} };
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return { id, name, arguments: parsed as Record<string, unknown> };
  } catch {
    // fall through: the model wrote something that is not JSON (often cut off by max_tokens)
  }
  return { id, name, arguments: {}, invalid_arguments: raw.slice(0, 100_000) };
}

/** About four characters a token: used only when a provider reports no usage, so a turn never counts zero. */
export function estimateUsage(messages: readonly ModelMessage[], text: string, calls: readonly ModelToolCall[]): ModelUsage {
  let inChars = 0;
  for (const m of messages) inChars += m.content.length + (m.role === "assistant" ? JSON.stringify(m.tool_calls ?? []).length : 0);
  const outChars = text.length + (calls.length ? JSON.stringify(calls.map((c) => c.arguments)).length : 0);
  return { input_tokens: Math.ceil(inChars / 4), output_tokens: Math.ceil(outChars / 4), estimated: true };
}

/** Calls the live-token callback; a callback that throws never fails the turn. */
export function deliver(onDelta: ((text: string) => void) | undefined, text: string): void {
  if (!onDelta || text === "") return;
  try {
    onDelta(text);
  } catch {
    // live tokens are best effort: the journaled text is the truth
  }
}

/**
 * The caller's signal plus an idle timer: the SDKs' timeouts end when the response headers
 * arrive, so a stream that stalls mid-body would hold the turn forever. `touch()` on every event.
 */
export function idleGuard(caller: AbortSignal | undefined, idleMs: number) {
  const controller = new AbortController();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => controller.abort(caller?.reason);
  if (caller?.aborted) onAbort();
  else caller?.addEventListener("abort", onAbort, { once: true });
  const touch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`no answer within ${idleMs} ms`));
    }, idleMs);
  };
  touch();
  return {
    signal: controller.signal,
    touch,
    timedOut: () => timedOut,
    dispose() {
      clearTimeout(timer);
      caller?.removeEventListener("abort", onAbort);
    },
  };
}
