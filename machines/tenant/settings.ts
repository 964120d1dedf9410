import { z } from "zod";

/** Upper bound for every concurrency figure; it also bounds the tenant's `running` map. */
export const MAX_CONCURRENCY_LIMIT = 10_000;
/** Most entries a per-project or per-provider map may hold, so a tenant record stays small. */
export const MAX_SETTINGS_ENTRIES = 1_000;

export const PRIORITY_CLASSES = ["interactive", "automation", "migration", "approval_resume"] as const;
export type PriorityClass = (typeof PRIORITY_CLASSES)[number];

/**
 * A tenant id: 1–32 characters of `[a-z0-9-]`, starting with a letter or digit, and never `ops`
 * (the API's operator token). It becomes a NATS subject token, a KV key and the prefix of its
 * runs' ids (`<tenant>_<hex>`), so nothing else passes: no dots, wildcards, spaces, `_`, `$`,
 * control characters or non-ASCII letters. The one rule for the API, the CLI and tenant creation.
 */
export const TenantIdSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,31}$/, "a tenant id is 1-32 characters of [a-z0-9-], starting with a letter or digit")
  .refine((s) => s !== "ops", "reserved tenant id");

/** True for a valid tenant id ({@link TenantIdSchema}). */
export function isTenantId(value: unknown): value is string {
  return TenantIdSchema.safeParse(value).success;
}

/** A run or project id: a safe token, never a key that would reach an object's prototype. */
export const TokenSchema = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_.:=-]{0,199}$/, "expected 1-200 characters of [A-Za-z0-9_.:=-]")
  .refine((s) => s !== "__proto__", "reserved name");

const bounded = (record: object) => Object.keys(record).length <= MAX_SETTINGS_ENTRIES;
const tooMany = `at most ${MAX_SETTINGS_ENTRIES} entries`;

const Weight = z.number().positive().max(1_000_000);
/** A class's fraction of a node's worker slots this tenant's work of that class may hold at once (a cap: at most ceil(share × slots), never below one). */
const Share = z.number().min(0).max(1);
const ClassShares = z.strictObject({
  interactive: Share.optional(),
  automation: Share.optional(),
  migration: Share.optional(),
  approval_resume: Share.optional(),
});
const Concurrency = z.number().int().min(1).max(MAX_CONCURRENCY_LIMIT);
const ProjectCaps = z.record(TokenSchema, z.number().int().min(0).max(MAX_CONCURRENCY_LIMIT)).refine(bounded, tooMany);
const DayCap = z.number().int().min(0).max(1_000_000_000);
const ProviderModel = z
  .string()
  .max(200)
  .regex(/^[^/\s]+\/\S+$/, "expected 'provider/model'");
const Quota = z.strictObject({
  requests_per_minute: z.number().int().positive(),
  tokens_per_minute: z.number().int().positive(),
});
const ProviderQuotas = z.record(ProviderModel, Quota).refine(bounded, tooMany);
/** Limits on dynamic expansion (a map's fan-out), checked by the tenant before any item starts. */
const ExpansionLimits = z.strictObject({
  /** Items one expansion may add. */
  max_children: z.number().int().min(0).max(1_000_000).default(1_000),
  /** Depth of the new items (a top-level run's steps are depth 1). */
  max_depth: z.number().int().min(0).max(100).default(6),
  /** Steps one run may hold, its nodes and every expanded item together. */
  max_total_steps: z.number().int().min(0).max(10_000_000).default(10_000),
  /** Estimated cost of one run (one unit per step unless a node says otherwise). */
  max_estimated_cost: z.number().min(0).max(1e12).default(100_000),
  /** Expanded items active at once across the whole tenant. */
  max_active_descendants: z.number().int().min(0).max(10_000_000).default(10_000),
});
export type TenantExpansionLimits = z.output<typeof ExpansionLimits>;
const Cents = z.number().int().min(0).max(1e12);
/**
 * The money a tenant's runs may spend in a UTC day, in cents (null or absent: no budget). A start
 * is refused `budget_exhausted` before any run exists when what was spent today, plus what live
 * runs reserved, plus its own reservation would pass it. A run reserves its definition's
 * `limits.max_cost_cents`, or `run_reservation_cents` when the definition sets none.
 */
const DayBudget = Cents.nullable();
/** The callers (a start's `source`) that may start interactive runs; the CLI's person at a terminal by default. */
const InteractiveSources = z.array(TokenSchema).max(100);
export const DEFAULT_INTERACTIVE_SOURCES: readonly string[] = Object.freeze(["cli"]);

/**
 * A tenant's settings, with defaults: weight 1 (fair-share weight), 100 active runs, no project
 * caps, 100,000 starts per UTC day, no provider quotas, the expansion limits above, interactive
 * starts from the CLI only. Unknown keys are rejected, so a typo
 * is an error instead of a silently ignored setting.
 */
export const TenantSettingsSchema = z.strictObject({
  weight: Weight.default(1),
  class_shares: ClassShares.optional(),
  max_concurrency: Concurrency.default(100),
  project_max_concurrency: ProjectCaps.default(() => ({})),
  day_cap: DayCap.default(100_000),
  provider_quotas: ProviderQuotas.default(() => ({})),
  expansion_limits: ExpansionLimits.default(() => ExpansionLimits.parse({})),
  interactive_sources: InteractiveSources.default(() => [...DEFAULT_INTERACTIVE_SOURCES]),
  day_budget_cents: DayBudget.optional(),
  run_reservation_cents: Cents.default(0),
});
export type TenantSettings = z.output<typeof TenantSettingsSchema>;

/**
 * A partial update: each key given replaces that setting as a whole (a map such as
 * `project_max_concurrency` is replaced, not merged, so an entry can be removed); keys not
 * given keep their current value.
 */
export const TenantSettingsPatchSchema = z.strictObject({
  weight: Weight.optional(),
  class_shares: ClassShares.optional(),
  max_concurrency: Concurrency.optional(),
  project_max_concurrency: ProjectCaps.optional(),
  day_cap: DayCap.optional(),
  provider_quotas: ProviderQuotas.optional(),
  expansion_limits: ExpansionLimits.optional(),
  interactive_sources: InteractiveSources.optional(),
  day_budget_cents: DayBudget.optional(),
  run_reservation_cents: Cents.optional(),
});
export type TenantSettingsPatch = z.output<typeof TenantSettingsPatchSchema>;

export type SettingsResult = { ok: true; settings: TenantSettings } | { ok: false; reason: string };

function issues(error: z.ZodError): string {
  return error.issues.map((i) => `${["settings", ...i.path.map(String)].join(".")}: ${i.message}`).join("; ");
}

/**
 * `patch` applied over `current` (or over the defaults when there is none), validated as a
 * whole. Never throws: anything that is not a valid patch is `{ ok: false, reason }`.
 */
export function mergeSettings(current: TenantSettings | undefined, patch: unknown): SettingsResult {
  const p = TenantSettingsPatchSchema.safeParse(patch ?? {});
  if (!p.success) return { ok: false, reason: issues(p.error) };
  const given = Object.fromEntries(Object.entries(p.data).filter(([, v]) => v !== undefined));
  const merged = TenantSettingsSchema.safeParse({ ...current, ...given });
  return merged.success ? { ok: true, settings: merged.data } : { ok: false, reason: issues(merged.error) };
}

/** JSON with object keys sorted, so two equal settings compare equal whatever their key order. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** The settings keys whose values differ between `a` and `b`, in schema order. */
export function changedSettings(a: TenantSettings, b: TenantSettings): (keyof TenantSettings)[] {
  const keys = Object.keys(TenantSettingsSchema.shape) as (keyof TenantSettings)[];
  return keys.filter((k) => stableJson(a[k]) !== stableJson(b[k]));
}
