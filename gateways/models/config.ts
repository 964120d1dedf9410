import { inspect } from "node:util";
import { z } from "zod";

/** A provider name: the part before `/` in an agent node's `"<provider>/<model>"`. */
export const ModelProviderNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a provider name is 1-64 letters, digits, '_' or '-'");
const ModelNameSchema = z.string().min(1).max(200).regex(/^\S+$/, "a model name has no spaces");

const PerMillion = z.number().min(0).max(1e9);
/** What a model costs, in cents per million tokens (fractions allowed: $0.15 is 15). */
export const ModelPriceSchema = z.strictObject({ input_cents_per_mtok: PerMillion, output_cents_per_mtok: PerMillion });
export type ModelPrice = z.output<typeof ModelPriceSchema>;

/** The same shape as a tenant's `provider_quotas` entry: it applies to each of the provider's models. */
export const ModelQuotaSchema = z.strictObject({
  requests_per_minute: z.number().int().positive(),
  tokens_per_minute: z.number().int().positive(),
});

const ApiKey = z.string().min(1).max(4_096);
const HttpUrl = z.url({ protocol: /^https?$/ }).max(2_048);

const Common = {
  name: ModelProviderNameSchema,
  /** The models a run may ask this provider for; absent: any name the provider knows. */
  models: z.array(ModelNameSchema).max(1_000).optional(),
  prices: z
    .record(ModelNameSchema, ModelPriceSchema)
    .refine((r) => Object.keys(r).length <= 1_000, "at most 1000 prices")
    .default({}),
  quota: ModelQuotaSchema.optional(),
};
const Remote = {
  ...Common,
  /** Sent with every request, never shown: `view()` says only whether one is set. */
  api_key: ApiKey.optional(),
  /** A request silent this long (no response headers, or no streamed event) fails `transient` (timeout). */
  timeout_ms: z.number().int().min(100).max(3_600_000).default(120_000),
};

const ScriptedToolCall = z.strictObject({
  id: z.string().min(1).max(200).optional(),
  name: z.string().min(1).max(128),
  arguments: z.record(z.string(), z.unknown()).default({}),
});
const ScriptedUsage = z.strictObject({ input_tokens: z.number().int().min(0), output_tokens: z.number().int().min(0) });
/** One scripted turn: text and/or tool calls; usage estimated from the characters when absent. */
export const ScriptedTurnSchema = z.strictObject({
  text: z.string().max(1_000_000).default(""),
  tool_calls: z.array(ScriptedToolCall).max(128).default([]),
  usage: ScriptedUsage.optional(),
  stop_reason: z.enum(["end_turn", "tool_use", "max_tokens", "refusal", "other"]).optional(),
  /** How long this turn takes to answer (abortable), for tests of turns in flight. */
  delay_ms: z.number().int().min(0).max(3_600_000).optional(),
});
export type ScriptedTurn = z.output<typeof ScriptedTurnSchema>;
export const ModelScriptSchema = z.strictObject({
  turns: z.array(ScriptedTurnSchema).max(10_000),
  /** Delay of every turn that sets none. */
  delay_ms: z.number().int().min(0).max(3_600_000).default(0),
  /** Streamed text comes in pieces of about this many characters (whole words). */
  chunk_chars: z.number().int().min(1).max(1_000_000).default(16),
});
export type ModelScript = z.output<typeof ModelScriptSchema>;

/**
 * A tenant's model provider as an operator registers it. `openai` is any OpenAI-compatible
 * chat-completions server (OpenAI, vLLM, Ollama, LM Studio: set `base_url`); `anthropic` the
 * Messages API; `scripted` answers from its `script`, for tests and the demo.
 */
export const ModelProviderSpecSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    ...Remote,
    kind: z.literal("openai"),
    base_url: HttpUrl.default("https://api.openai.com/v1"),
    /** OpenAI's own API wants `max_completion_tokens`; most compatible servers know only `max_tokens`. */
    max_tokens_param: z.enum(["max_tokens", "max_completion_tokens"]).optional(),
  }),
  z.strictObject({ ...Remote, kind: z.literal("anthropic"), base_url: HttpUrl.default("https://api.anthropic.com") }),
  z.strictObject({ ...Common, kind: z.literal("scripted"), script: ModelScriptSchema }),
]);
export type ModelProviderSpec = z.output<typeof ModelProviderSpecSchema>;
export type ModelProviderKind = ModelProviderSpec["kind"];

/** A provider's spec without its key, kind by kind. */
export type KeylessSpec = ModelProviderSpec extends infer T ? (T extends unknown ? Omit<T, "api_key"> : never) : never;
/** What any read of a provider shows: the spec without its key (only whether one is set). */
export type ModelProviderView = KeylessSpec & { api_key_set: boolean };

// Keys live here, beside their record and out of its properties, so that no spread, JSON.stringify,
// console.log or structured clone of a record can carry one.
const keys = new WeakMap<ModelProviderRecord, string>();

/**
 * A validated provider. Its key is not a property: `view()`, `toJSON()` and `inspect` omit it;
 * only this folder's adapters and store read it (`providerKey`, `storedSpec`).
 */
export class ModelProviderRecord {
  readonly spec: Readonly<KeylessSpec>;

  private constructor(spec: ModelProviderSpec) {
    const { api_key, ...rest } = spec as ModelProviderSpec & { api_key?: string };
    this.spec = Object.freeze(rest) as KeylessSpec;
    if (api_key !== undefined) keys.set(this, api_key);
  }

  /** Validates an operator's input. A refusal names the fields at fault and never echoes a value. */
  static parse(input: unknown): { outcome: "valid"; record: ModelProviderRecord } | { outcome: "invalid"; reason: string } {
    const parsed = ModelProviderSpecSchema.safeParse(input);
    if (!parsed.success) {
      const reason = parsed.error.issues
        .slice(0, 10)
        .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)
        .join("; ");
      return { outcome: "invalid", reason: redactKeyOf(input, reason) };
    }
    return { outcome: "valid", record: new ModelProviderRecord(parsed.data) };
  }

  get name(): string {
    return this.spec.name;
  }

  get kind(): ModelProviderKind {
    return this.spec.kind;
  }

  view(): ModelProviderView {
    return { ...structuredClone(this.spec as ModelProviderSpec), api_key_set: keys.has(this) } as ModelProviderView;
  }

  toJSON(): ModelProviderView {
    return this.view();
  }

  [inspect.custom](): ModelProviderView {
    return this.view();
  }

  /** The price of `model`, when the operator set one. */
  price(model: string): ModelPrice | undefined {
    return Object.hasOwn(this.spec.prices, model) ? this.spec.prices[model] : undefined;
  }

  /** Whether a run may ask for `model` (any, when the record lists none). */
  allows(model: string): boolean {
    return this.spec.models === undefined || this.spec.models.includes(model);
  }
}

/** The key of a record, for the adapter that sends it. Not exported from the folder. */
export function providerKey(record: ModelProviderRecord): string | undefined {
  return keys.get(record);
}

/** The full spec, key included, for the store that persists it. Not exported from the folder. */
export function storedSpec(record: ModelProviderRecord): ModelProviderSpec {
  const key = keys.get(record);
  return { ...structuredClone(record.spec as ModelProviderSpec), ...(key !== undefined ? { api_key: key } : {}) };
}

/** Cost of one turn in cents (fractional: the meter decides how to round), or undefined if unpriced. */
export function turnCostCents(price: ModelPrice | undefined, usage: { input_tokens: number; output_tokens: number }): number | undefined {
  if (!price) return undefined;
  return (usage.input_tokens * price.input_cents_per_mtok + usage.output_tokens * price.output_cents_per_mtok) / 1_000_000;
}

function redactKeyOf(input: unknown, text: string): string {
  const key = typeof input === "object" && input !== null ? (input as { api_key?: unknown }).api_key : undefined;
  return typeof key === "string" && key.length > 0 ? redact(text, [key]) : text;
}

/** Every occurrence of each secret replaced, so a provider's message that echoes a key shows none. */
export function redact(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join("[redacted]");
  return out;
}
