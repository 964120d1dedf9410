import type { NatsConnection } from "@nats-io/transport-node";
import { incrementCounter } from "../../runtime/index.js";

export const QUOTA_STREAM = "RUNWAY_QUOTA";

export type QuotaTake =
  | { ok: true; count: number; tokens: number; window: number }
  | { ok: false; count: number; tokens: number; retry_at: number }
  | { ok: false; unavailable: string; retry_at: number };

/** A provider quota per window: requests, and (estimated) tokens. */
export interface QuotaLimits {
  requests: number;
  tokens?: number;
}

/**
 * Provider quotas shared by the whole cluster: JetStream counters per (tenant, provider,
 * window) — `Nats-Incr` on `rw.quota.<tenant>.<provider>.<window>.requests` (by 1) and
 * `….tokens` (by the step's estimated cost) answers the new totals, so every node sees one
 * total and no more than the limits are granted per window across all of them. A refused take
 * still counts, which can only make the window stricter. Old windows age out of the stream.
 */
export class QuotaGate {
  constructor(
    private readonly nc: NatsConnection,
    private readonly windowMs = 60_000,
  ) {}

  async take(tenant: string, provider: string, limits: QuotaLimits, cost: number, now: number): Promise<QuotaTake> {
    const window = Math.floor(now / this.windowMs);
    const next = (window + 1) * this.windowMs;
    const base = `rw.quota.${tenant}.${provider.replace(/[^A-Za-z0-9_-]/g, "_")}.${window}`;
    const [requests, tokens] = await Promise.all([
      incrementCounter(this.nc, `${base}.requests`, 1),
      limits.tokens === undefined ? Promise.resolve(0) : incrementCounter(this.nc, `${base}.tokens`, Math.max(1, Math.ceil(cost))),
    ]);
    if (typeof requests === "string") return { ok: false, unavailable: requests, retry_at: now + 250 };
    if (typeof tokens === "string") return { ok: false, unavailable: tokens, retry_at: now + 250 };
    const ok = requests <= limits.requests && (limits.tokens === undefined || tokens <= limits.tokens);
    return ok ? { ok: true, count: requests, tokens, window } : { ok: false, count: requests, tokens, retry_at: next };
  }
}
