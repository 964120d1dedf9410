import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
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

/** How long a watch that ended waits before it starts again. */
const REWATCH_MS = 1_000;

/**
 * Per-tenant MCP server registry (`rw_tools`, `<tenant>.<server>`), read on every tool call, so
 * served from memory kept current by a watch (entries keep revisions: an older read never overwrites
 * a newer value). The watch also tells this node a server changed or went (`onChange`); it starts
 * before any session can open and restarts if it ends.
 */
export class ToolRegistry {
  private kv: KV | undefined;
  private readonly cache = new Map<string, { revision: number; record: ToolServerRecord | null }>();
  private watcher: Promise<{ stop(): void }> | undefined;
  private readonly listeners: ToolServerChange[] = [];
  private closed = false;

  constructor(private readonly nc: NatsConnection) {}

  private async bucket(): Promise<KV> {
    this.kv ??= await new Kvm(this.nc).open(TOOLS_BUCKET);
    return this.kv;
  }

  /** Calls `listener` for every change this registry learns of (from its own writes and its watch). */
  onChange(listener: ToolServerChange): void {
    this.listeners.push(listener);
  }

  async put(tenant: string, spec: ToolServerSpec, now: number): Promise<ToolServerRecord> {
    const record: ToolServerRecord = { tenant, spec, updated_at: now };
    const key = toolServerKey(tenant, spec.name);
    this.remember(key, await (await this.bucket()).put(key, JSON.stringify(record)), record);
    return record;
  }

  async get(tenant: string, name: string): Promise<ToolServerRecord | undefined> {
    this.watch();
    const key = toolServerKey(tenant, name);
    const cached = this.cache.get(key);
    if (cached) return cached.record ?? undefined;
    const e = await (await this.bucket()).get(key);
    if (!e) return undefined;
    this.remember(key, e.revision, e.operation === "PUT" ? e.json<ToolServerRecord>() : null);
    return this.cache.get(key)?.record ?? undefined;
  }

  private remember(key: string, revision: number, record: ToolServerRecord | null): void {
    const known = this.cache.get(key);
    if (known && known.revision > revision) return;
    this.cache.set(key, { revision, record });
    if (known?.revision !== revision) this.changed(key, record);
  }

  private changed(key: string, record: ToolServerRecord | null): void {
    for (const listener of this.listeners) listener(key, record);
  }

  private watch(): void {
    if (this.watcher || this.closed) return;
    const watching = (async () => {
      const iterator = await (await this.bucket()).watch({ key: ">" });
      void (async () => {
        for await (const e of iterator) this.remember(e.key, e.revision, e.operation === "PUT" ? e.json<ToolServerRecord>() : null);
      })()
        .catch(() => undefined)
        .finally(() => {
          // A watch that ended (connection lost) leaves nothing stale behind. Another starts, so
          // changes made meanwhile still reach the sessions: it replays every key's last value.
          if (this.watcher === watching) this.watcher = undefined;
          this.cache.clear();
          if (!this.closed && this.listeners.length > 0) setTimeout(() => this.watch(), REWATCH_MS).unref();
        });
      return iterator;
    })();
    this.watcher = watching;
    watching.catch(() => {
      if (this.watcher === watching) this.watcher = undefined;
    });
  }

  /** Stops the watch (the node is stopping). */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.watcher;
    this.watcher = undefined;
    (await w?.catch(() => undefined))?.stop();
    this.cache.clear();
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
    this.cache.delete(key);
    this.changed(key, null);
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
