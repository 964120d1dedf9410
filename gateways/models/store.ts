import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { WatchedBucket } from "../../runtime/index.js";
import { ModelProviderRecord, storedSpec, type KeylessSpec, type ModelProviderView } from "./config.js";

export const MODELS_BUCKET = "rw_models";

/** What any read of the store shows: the record's view (no key) and when it was last put. */
export type StoredProviderView = ModelProviderView & { updated_at: number };

/**
 * A bucket value. The key is not in `spec` (what a reader of the record prints) but beside it,
 * base64-encoded under `sealed_key`: a dump of the bucket, a log line or a grep for the key's text
 * does not show it. Encoding is not encryption: the bucket's subjects are the gateway's alone.
 */
interface StoredProvider {
  tenant: string;
  spec: KeylessSpec;
  updated_at: number;
  sealed_key?: string;
}

type Entry = { record: ModelProviderRecord; updated_at: number };

/** A write whose revision precondition failed: another writer got there first. */
function isConflict(err: unknown): boolean {
  return /wrong last sequence|key exists/i.test(String((err as Error)?.message));
}

/** A put or delete that keeps losing its revision race gives up after this many tries. */
const MAX_WRITE_TRIES = 8;

function providerKey(tenant: string, name: string): string {
  return `${tenant}.${name}`;
}

function encode(tenant: string, record: ModelProviderRecord, now: number): string {
  const { api_key, ...spec } = storedSpec(record) as ReturnType<typeof storedSpec> & { api_key?: string };
  const value: StoredProvider = {
    tenant,
    spec: spec as KeylessSpec,
    updated_at: now,
    ...(api_key !== undefined ? { sealed_key: Buffer.from(api_key, "utf8").toString("base64") } : {}),
  };
  return JSON.stringify(value);
}

/** A stored value back to a record; one this version cannot read is treated as absent (never an error that could quote it). */
function decode(text: string): Entry | null {
  let value: StoredProvider;
  try {
    value = JSON.parse(text) as StoredProvider;
  } catch {
    return null;
  }
  const key = typeof value.sealed_key === "string" ? Buffer.from(value.sealed_key, "base64").toString("utf8") : undefined;
  const parsed = ModelProviderRecord.parse({ ...value.spec, ...(key !== undefined ? { api_key: key } : {}) });
  return parsed.outcome === "valid" ? { record: parsed.record, updated_at: value.updated_at } : null;
}

function viewOf(entry: Entry): StoredProviderView {
  return { ...entry.record.view(), updated_at: entry.updated_at };
}

/**
 * Per-tenant model providers: bucket `rw_models`, key `<tenant>.<provider>`. Writes are
 * revision-checked (a create that finds a record, or an update that finds another revision,
 * reads again and retries), so `created` / `updated` / `deleted` say what happened. Like the
 * tool registry, every node keeps a copy in memory kept current by a watch of the bucket
 * ({@link WatchedBucket}), so a model call finds its provider (`provider`) without a store read. Only this folder reads the keys: `get` and `list` answer views.
 */
export class ModelStore {
  private kv: KV | undefined;
  private readonly watched = new WatchedBucket<Entry>(
    () => this.bucket(),
    (e) => decode(e.string()),
  );

  constructor(private readonly nc: NatsConnection) {}

  private async bucket(): Promise<KV> {
    this.kv ??= await new Kvm(this.nc).open(MODELS_BUCKET);
    return this.kv;
  }

  /** Starts the watch now (the node's start), rather than on the first read. */
  async start(): Promise<void> {
    await this.watched.start();
  }

  /** Creates or replaces the tenant's provider of the record's name. */
  async put(tenant: string, record: ModelProviderRecord, now: number): Promise<{ outcome: "created" | "updated"; provider: StoredProviderView }> {
    const kv = await this.bucket();
    const key = providerKey(tenant, record.name);
    const value = encode(tenant, record, now);
    for (let tries = 1; ; tries++) {
      const current = await kv.get(key);
      try {
        const revision = current ? await kv.update(key, value, current.revision) : await kv.create(key, value);
        const entry = { record, updated_at: now };
        this.watched.remember(key, revision, entry);
        return { outcome: current?.operation === "PUT" ? "updated" : "created", provider: viewOf(entry) };
      } catch (err) {
        if (!isConflict(err) || tries >= MAX_WRITE_TRIES) throw err;
      }
    }
  }

  /** The provider as a model call uses it (key included, inside this folder), from memory once seen. */
  async provider(tenant: string, name: string): Promise<ModelProviderRecord | undefined> {
    return (await this.watched.get(providerKey(tenant, name)))?.record;
  }

  async get(tenant: string, name: string): Promise<StoredProviderView | undefined> {
    const entry = await this.watched.get(providerKey(tenant, name));
    return entry ? viewOf(entry) : undefined;
  }

  async list(tenant: string): Promise<StoredProviderView[]> {
    const kv = await this.bucket();
    const out: StoredProviderView[] = [];
    for await (const key of await kv.keys(`${tenant}.*`)) {
      const view = await this.get(tenant, key.slice(tenant.length + 1));
      if (view) out.push(view);
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Deletes the provider, revision-checked; false when there is none. */
  async delete(tenant: string, name: string): Promise<boolean> {
    const kv = await this.bucket();
    const key = providerKey(tenant, name);
    for (let tries = 1; ; tries++) {
      const current = await kv.get(key);
      if (!current || current.operation !== "PUT") return false;
      try {
        await kv.delete(key, { previousSeq: current.revision });
        this.watched.removed(key, current.revision);
        return true;
      } catch (err) {
        if (!isConflict(err) || tries >= MAX_WRITE_TRIES) throw err;
      }
    }
  }

  /** Stops the watch (the node is stopping). */
  async close(): Promise<void> {
    await this.watched.close();
  }
}

export async function ensureModelsBucket(nc: NatsConnection, replicas: number): Promise<void> {
  try {
    await new Kvm(nc).create(MODELS_BUCKET, { history: 1, replicas, storage: "file", description: "Runway model providers per tenant: <tenant>.<provider>" });
  } catch (err) {
    if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
  }
}
