import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { z } from "zod";
import { TENANTS_BUCKET } from "./topology.js";

export const TENANT_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;
export const TenantRecordSchema = z.object({ id: z.string().regex(TENANT_PATTERN), name: z.string().max(200).optional(), created_at: z.number() });
export type TenantRecord = z.infer<typeof TenantRecordSchema>;

/**
 * The tenants Runway serves. A request naming any other tenant is answered
 * `tenant_not_found`, the same way whether the id is malformed or merely unknown.
 */
export class TenantDirectory {
  private kv: KV | undefined;
  private readonly known = new Set<string>();

  constructor(private readonly nc: NatsConnection) {}

  private async bucket(): Promise<KV> {
    this.kv ??= await new Kvm(this.nc).open(TENANTS_BUCKET);
    return this.kv;
  }

  async exists(id: string): Promise<boolean> {
    if (!TENANT_PATTERN.test(id)) return false;
    if (this.known.has(id)) return true;
    const entry = await (await this.bucket()).get(`tenant.${id}`);
    const found = entry !== null && entry.operation === "PUT";
    if (found) this.known.add(id);
    return found;
  }

  async put(record: { id: string; name?: string }, now: number): Promise<{ outcome: "created" | "exists"; tenant: TenantRecord } | { outcome: "invalid_input"; reason: string }> {
    const parsed = TenantRecordSchema.safeParse({ ...record, created_at: now });
    if (!parsed.success) return { outcome: "invalid_input", reason: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
    const kv = await this.bucket();
    try {
      await kv.create(`tenant.${parsed.data.id}`, JSON.stringify(parsed.data));
      this.known.add(parsed.data.id);
      return { outcome: "created", tenant: parsed.data };
    } catch {
      const existing = await kv.get(`tenant.${parsed.data.id}`);
      return { outcome: "exists", tenant: existing ? TenantRecordSchema.parse(existing.json()) : parsed.data };
    }
  }

  async list(): Promise<TenantRecord[]> {
    const kv = await this.bucket();
    const out: TenantRecord[] = [];
    for await (const key of await kv.keys("tenant.>")) {
      const e = await kv.get(key);
      if (e && e.operation === "PUT") out.push(TenantRecordSchema.parse(e.json()));
    }
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }
}
