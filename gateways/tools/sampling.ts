// A server's `sampling/createMessage`, checked against its registration's sampling policy before
// the caller's sampler (the run's model budget and journal) is asked: which model, how many
// tokens, and a request the model gateway can take (text only). A refusal carries the MCP error
// code that says why: -32602 (InvalidParams) for malformed params, -32600 (InvalidRequest) for
// what the policy does not allow.
import { z } from "zod";
import { canonicalJson } from "../../machines/index.js";
import { createHash } from "node:crypto";
import type { SamplingAsk } from "../../actors/index.js";
import type { ToolServerSpec } from "./registry.js";

export const INVALID_REQUEST = -32600;
export const INVALID_PARAMS = -32602;

export type SamplingPolicy = NonNullable<ToolServerSpec["sampling"]>;

const Text = z.object({ type: z.literal("text"), text: z.string().max(1_000_000) });
const Content = z.union([Text, z.array(Text).min(1).max(64)]);
/** The params of `sampling/createMessage` Runway answers: text messages (2025-11-25 allows content arrays). */
const ParamsSchema = z.object({
  messages: z
    .array(z.object({ role: z.enum(["user", "assistant"]), content: Content }))
    .min(1)
    .max(256),
  systemPrompt: z.string().max(100_000).optional(),
  maxTokens: z.number().int().positive(),
  temperature: z.number().min(0).max(2).optional(),
  modelPreferences: z
    .object({
      hints: z
        .array(z.object({ name: z.string().max(200).optional() }))
        .max(32)
        .optional(),
    })
    .optional(),
  tools: z.undefined({ error: "sampling with tools is not offered" }).optional(),
});

export type SamplingCheck = { ok: true; ask: SamplingAsk } | { ok: false; mcp_code: number; code: "tool_sampling_refused"; message: string };

const refuse = (mcp_code: number, message: string): SamplingCheck => ({ ok: false, mcp_code, code: "tool_sampling_refused", message });

/**
 * The model a request may use: the first allowed model one of its hints names (the whole
 * `<provider>/<model>`, or the part after the slash), else the policy's first.
 */
function chosenModel(policy: SamplingPolicy, hints: readonly { name?: string | undefined }[]): string {
  for (const h of hints) {
    if (!h.name) continue;
    const found = policy.models.find((m) => m === h.name || m.slice(m.indexOf("/") + 1) === h.name);
    if (found) return found;
  }
  return policy.models[0]!;
}

/** Checks one sampling request of `server` (asked in input round `round`, at `index`). */
export function checkSampling(server: string, policy: SamplingPolicy | undefined, params: unknown, round: number, index: number): SamplingCheck {
  if (!policy) return refuse(INVALID_REQUEST, `${server} may not sample: its registration sets no sampling policy`);
  const parsed = ParamsSchema.safeParse(params ?? {});
  if (!parsed.success) {
    const why = parsed.error.issues
      .slice(0, 5)
      .map((i) => `${i.path.join(".") || "(params)"}: ${i.message}`)
      .join("; ");
    return refuse(INVALID_PARAMS, `${server}'s sampling/createMessage params are not ones Runway answers (${why})`);
  }
  const p = parsed.data;
  if (p.maxTokens > policy.max_tokens)
    return refuse(INVALID_REQUEST, `${server} asks to sample ${p.maxTokens} tokens: its policy allows at most ${policy.max_tokens}`);
  const text = (c: z.infer<typeof Content>) => (Array.isArray(c) ? c.map((t) => t.text).join("\n") : c.text);
  const messages: SamplingAsk["request"]["messages"] = [
    ...(p.systemPrompt ? [{ role: "system" as const, content: p.systemPrompt }] : []),
    ...p.messages.map((m) => ({ role: m.role, content: text(m.content) })),
  ];
  return {
    ok: true,
    ask: {
      model: chosenModel(policy, p.modelPreferences?.hints ?? []),
      request: { messages, max_tokens: p.maxTokens, ...(p.temperature !== undefined ? { temperature: p.temperature } : {}) },
      round,
      index,
      hash: createHash("sha256")
        .update(canonicalJson(params ?? null))
        .digest("hex"),
    },
  };
}
