import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { WatchedBucket } from "../../runtime/index.js";
import { z } from "zod";
import { ToolServerNameSchema } from "../../machines/index.js";

export const TOOLS_BUCKET = "rw_tools";

const ClassSchema = z.enum(["read_only", "idempotent", "non_idempotent"]);
const EnvSchema = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/), z.string().max(8_192));
const HeadersSchema = z.record(z.string().regex(/^[A-Za-z0-9-]{1,128}$/), z.string().max(8_192));

/**
 * A tenant's MCP server as an operator registers it. Credentials (`secret_env` for a stdio
 * server, `secret_headers` for an HTTP one) stay with the gateway: no read of the registry, no
 * handler and no model ever sees them.
 */
export const ToolServerSpecSchema = z
  .strictObject({
    name: ToolServerNameSchema,
    transport: z.discriminatedUnion("type", [
      z.strictObject({
        type: z.literal("stdio"),
        command: z.string().min(1).max(1_024),
        args: z.array(z.string().max(4_096)).max(64).default([]),
        env: EnvSchema.optional(),
        secret_env: EnvSchema.optional(),
      }),
      z.strictObject({
        type: z.literal("http"),
        url: z.url({ protocol: /^https?$/ }).max(2_048),
        secret_headers: HeadersSchema.optional(),
      }),
    ]),
    /**
     * The MCP revision the server speaks: `2025-11-25` (the SDK's, with its `initialize` handshake
     * and core tasks) or `2026-07-28` (stateless, Streamable HTTP only, tasks extension). A
     * 2026-07-28 server that refuses it and offers only 2025-11-25 is reached on 2025-11-25.
     */
    protocol: z.enum(["2025-11-25", "2026-07-28"]).default("2025-11-25"),
    /** Annotations count only for a trusted server (see `effectiveClass`). */
    trusted: z.boolean().default(false),
    /**
     * Per non-idempotent tool, a read-only tool of the same server that tells whether a call
     * happened: called with `{effect_key, tool, arguments}`, it answers `{found, result?}`. With one,
     * a call whose outcome is unknown is looked up instead of held for a person.
     */
    lookups: z.record(z.string().min(1).max(128), z.string().min(1).max(128)).default({}),
    /** The operator's class per tool: wins over annotations. */
    overrides: z.record(z.string().min(1).max(128), ClassSchema).default({}),
    /**
     * Per tool, what one call costs in cents: a priced call is metered against its run tree's
     * `max_cost_cents` and its tenant's day budget before it is made. Unpriced tools cost nothing.
     */
    prices: z.record(z.string().min(1).max(128), z.number().int().min(0).max(1_000_000_000)).default({}),
    /**
     * The server may ask for `sampling/createMessage` during a call (MCP 2026-07-28: with the call's
     * `input_required`), answered by the tenant's model gateway under the calling run's budget:
     * with one of `models` (`<provider>/<model>`: the first one a request's `modelPreferences`
     * hints name, else the first), for at most `max_tokens` output tokens. Absent: refused.
     */
    sampling: z
      .strictObject({
        models: z
          .array(z.string().regex(/^[A-Za-z0-9_-]{1,64}\/\S{1,200}$/, "a sampling model is <provider>/<model>"))
          .min(1)
          .max(32),
        max_tokens: z.number().int().min(1).max(1_000_000).default(1_024),
      })
      .optional(),
    /** A call that has not answered in this long fails `tool_timeout` (a step's own timeout may be shorter). */
    call_timeout_ms: z.number().int().min(100).max(3_600_000).default(60_000),
  })
  .refine((s) => s.protocol !== "2026-07-28" || s.transport.type === "http", {
    message: "MCP 2026-07-28 servers are reached over Streamable HTTP",
    path: ["protocol"],
  });
export type ToolServerSpec = z.infer<typeof ToolServerSpecSchema>;

export interface ToolServerRecord {
  tenant: string;
  spec: ToolServerSpec;
  updated_at: number;
}

/** What the registry shows: the spec without its secrets (their names only). */
export function redacted(record: ToolServerRecord): Record<string, unknown> {
  const { spec } = record;
  const t = spec.transport;
  const transport =
    t.type === "stdio"
      ? { type: t.type, command: t.command, args: t.args, ...(t.env ? { env: t.env } : {}), ...(t.secret_env ? { secret_env: Object.keys(t.secret_env) } : {}) }
      : { type: t.type, url: t.url, ...(t.secret_headers ? { secret_headers: Object.keys(t.secret_headers) } : {}) };
  return { ...spec, transport, updated_at: record.updated_at };
}

/** The registry's key of a tenant's server (and the key its sessions are pooled under). */
export function toolServerKey(tenant: string, name: string): string {
  return `${tenant}.${name}`;
}

/** Told of a server's record that changed (put again, or deleted: `null`), by this node or another. */
export type ToolServerChange = (key: string, record: ToolServerRecord | null) => void;

/**
 * Per-tenant MCP server registry (`rw_tools`, `<tenant>.<server>`), read on every tool call, so
 * served from memory kept current by a watch ({@link WatchedBucket}). The watch also tells this
 * node a server changed or went (`onChange`); it starts before any session can open.
 */
export class ToolRegistry {
  private kv: KV | undefined;
  private readonly watched = new WatchedBucket<ToolServerRecord>(
    () => this.bucket(),
    (e) => e.json<ToolServerRecord>(),
  );

  constructor(private readonly nc: NatsConnection) {}

  private async bucket(): Promise<KV> {
    this.kv ??= await new Kvm(this.nc).open(TOOLS_BUCKET);
    return this.kv;
  }

  /** Calls `listener` for every change this registry learns of (from its own writes and its watch). */
  onChange(listener: ToolServerChange): void {
    this.watched.onChange(listener);
  }

  async put(tenant: string, spec: ToolServerSpec, now: number): Promise<ToolServerRecord> {
    const record: ToolServerRecord = { tenant, spec, updated_at: now };
    const key = toolServerKey(tenant, spec.name);
    this.watched.remember(key, await (await this.bucket()).put(key, JSON.stringify(record)), record);
    return record;
  }

  async get(tenant: string, name: string): Promise<ToolServerRecord | undefined> {
    return (await this.watched.get(toolServerKey(tenant, name))) ?? undefined;
  }

  /** Stops the watch (the node is stopping). */
  async close(): Promise<void> {
    await this.watched.close();
  }

  async list(tenant: string): Promise<ToolServerRecord[]> {
    const kv = await this.bucket();
    const out: ToolServerRecord[] = [];
    for await (const key of await kv.keys(`${tenant}.*`)) {
      const record = await this.get(tenant, key.slice(tenant.length + 1));
      if (record) out.push(record);
    }
    return out.sort((a, b) => a.spec.name.localeCompare(b.spec.name));
  }

  async delete(tenant: string, name: string): Promise<boolean> {
    const kv = await this.bucket();
    const key = toolServerKey(tenant, name);
    const e = await kv.get(key);
    if (!e || e.operation !== "PUT") return false;
    await kv.purge(key);
    this.watched.forget(key);
    return true;
  }
}

export async function ensureToolsBucket(nc: NatsConnection, replicas: number): Promise<void> {
  try {
    await new Kvm(nc).create(TOOLS_BUCKET, { history: 1, replicas, storage: "file", description: "Runway MCP tool servers per tenant: <tenant>.<server>" });
  } catch (err) {
    if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
  }
}
