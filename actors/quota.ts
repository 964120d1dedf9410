import type { NatsConnection } from "@nats-io/transport-node";
import { headers } from "@nats-io/transport-node";
import { rawRequest } from "../runtime/index.js";

export const QUOTA_STREAM = "RUNWAY_QUOTA";

export type QuotaTake = { ok: true; count: number; window: number } | { ok: false; count: number; retry_at: number } | { ok: false; unavailable: string; retry_at: number };

/**
 * Provider quotas shared by the whole cluster: a JetStream counter per (tenant, provider,
 * window) — `Nats-Incr` on `rw.quota.<tenant>.<provider>.<window>` answers the new count, so
 * every node sees one total and no more than `limit` calls are granted per window across all
 * of them. A refused take still counts, which can only make the window stricter. Old windows
 * age out of the stream.
 */
export class QuotaGate {
  constructor(private readonly nc: NatsConnection, private readonly windowMs = 60_000) {}

  async take(tenant: string, provider: string, limit: number, now: number): Promise<QuotaTake> {
    const window = Math.floor(now / this.windowMs);
    const next = (window + 1) * this.windowMs;
    const h = headers();
    h.set("Nats-Incr", "1");
    const reply = await rawRequest(this.nc, `rw.quota.${tenant}.${provider.replace(/[^A-Za-z0-9_-]/g, "_")}.${window}`, "", { headers: h, timeoutMs: 2_000 });
    if (!reply.ok) return { ok: false, unavailable: reply.reason, retry_at: now + 250 };
    const ack = JSON.parse(reply.msg.string()) as { val?: string; error?: { description?: string } };
    if (ack.error || ack.val === undefined) return { ok: false, unavailable: ack.error?.description ?? "no counter value", retry_at: now + 250 };
    const count = Number(ack.val);
    return count <= limit ? { ok: true, count, window } : { ok: false, count, retry_at: next };
  }
}
