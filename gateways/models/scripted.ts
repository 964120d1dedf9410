import type { ModelProviderRecord, ModelScript } from "./config.js";
import { abortableSleep } from "./retry.js";
import { deliver, estimateUsage } from "./turn.js";
import type { ModelCallOptions, ModelOutcome, ModelProvider, ModelRequest, ModelResponse } from "./types.js";

/** Which turn a request asks for: the number of assistant messages already in its conversation. */
export function scriptedTurnIndex(request: ModelRequest): number {
  let n = 0;
  for (const m of request.messages) if (m.role === "assistant") n++;
  return n;
}

/**
 * The answer of turn `index` of `script`, a pure function of its arguments (latency aside), so
 * a conversation rebuilt from the journal after a crash gets the very answers it got before.
 * Tool-call ids are `call_<turn>_<n>` unless the script names them.
 */
export function scriptedResponse(script: ModelScript, index: number, request: ModelRequest): Omit<ModelResponse, "latency_ms"> | undefined {
  const turn = script.turns[index];
  if (!turn) return undefined;
  const tool_calls = turn.tool_calls.map((c, n) => ({ id: c.id ?? `call_${index}_${n}`, name: c.name, arguments: structuredClone(c.arguments) }));
  return {
    text: turn.text,
    tool_calls,
    usage: turn.usage ? { ...turn.usage } : estimateUsage(request.messages, turn.text, tool_calls),
    stop_reason: turn.stop_reason ?? (tool_calls.length ? "tool_use" : "end_turn"),
    model: request.model,
  };
}

/** Splits text into pieces of about `size` characters, at word ends where it can. */
export function textPieces(text: string, size: number): string[] {
  const pieces: string[] = [];
  let current = "";
  for (const word of text.match(/\S+\s*|\s+/g) ?? []) {
    if (current && current.length + word.length > size) {
      pieces.push(current);
      current = "";
    }
    current += word;
  }
  if (current) pieces.push(current);
  return pieces;
}

/** Deterministic turns from a script, for tests and the demo: no network, the same streaming contract. */
export class ScriptedProvider implements ModelProvider {
  readonly kind = "scripted" as const;
  readonly name: string;
  readonly #script: ModelScript;

  constructor(record: ModelProviderRecord) {
    if (record.spec.kind !== "scripted") throw new Error(`provider ${record.name} is not a scripted provider`);
    this.name = record.name;
    this.#script = record.spec.script;
  }

  async complete(request: ModelRequest, options: ModelCallOptions = {}): Promise<ModelOutcome> {
    const started = performance.now();
    const index = scriptedTurnIndex(request);
    const answer = scriptedResponse(this.#script, index, request);
    if (!answer) {
      return {
        outcome: "failed",
        failure: { code: "model_bad_request", message: `${this.name}: the script has ${this.#script.turns.length} turns; turn ${index + 1} was asked` },
      };
    }
    const delay = this.#script.turns[index]?.delay_ms ?? this.#script.delay_ms;
    if (options.signal?.aborted || (delay > 0 && !(await abortableSleep(delay, options.signal)))) {
      return { outcome: "failed", failure: { code: "cancelled", message: "the call was cancelled" } };
    }
    for (const piece of textPieces(answer.text, this.#script.chunk_chars)) deliver(options.onDelta, piece);
    return { outcome: "ok", response: { ...answer, latency_ms: performance.now() - started } };
  }
}
