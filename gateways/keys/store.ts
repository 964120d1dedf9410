import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { z } from "zod";
import { WatchedBucket } from "../../runtime/index.js";

/** Bucket of the tenants' API keys: one key per API key, `<tenant>.<name>`. */
export const KEYS_BUCKET = "rw_api_keys";

/** An API key's name: its identity is `key:<tenant>/<name>`. */
export const ApiKeyNameSchema = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a key name is 1-63 characters of [a-z0-9-], starting with a letter or digit");

/** A reviewer group a key belongs to (an approval's `group`). */
export const ReviewerGroupSchema = z.string().min(1).max(64);

/** A key as any listing shows it: never its token, at most the token's last 4 characters. */
export interface ApiKeyView {
  id: string;
  name: string;
  /** The caller's identity: `key:<tenant>/<name>`. */
  identity: string;
  groups: string[];
  interactive: boolean;
  created_at: number;
  revoked: boolean;
  revoked_at?: number;
  last4: string;
}

/** The stored record: the view and the SHA-256 of the token (hex), never the token. */
interface StoredKey extends Omit<ApiKeyView, "identity"> {
  hash: string;
}

/** Who a bearer token is, once checked: its tenant, identity and what the key grants. */
export interface KeyCaller {
  tenant: string;
  name: string;
  identity: string;
  groups: string[];
  interactive: boolean;
}

export type CreateKeyResult = { outcome: "created"; key: ApiKeyView; token: string } | { outcome: "key_exists"; key: ApiKeyView };

const PREFIX = "rwk";
/** `rwk.<tenant>.<name>.<secret>`: the tenant and name find the record, the whole token is hashed. */
const TOKEN = /^rwk\.([a-z0-9][a-z0-9-]{0,31})\.([a-z0-9][a-z0-9-]{0,62})\.([A-Za-z0-9_-]{43})$/;
const MAX_WRITE_TRIES = 8;

/**
 * The token's digest. SHA-256, not bcrypt or scrypt: a token is 256 random bits, not a password a
 * person chose, so no dictionary or brute force reaches it and a slow hash would only slow every
 * request; the digest is enough for the bucket not to hold anything that authenticates.
 */
function digest(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

function viewOf(tenant: string, stored: StoredKey): ApiKeyView {
  const { hash: _hash, ...rest } = stored;
  return { ...rest, identity: `key:${tenant}/${stored.name}` };
}

function decode(text: string): StoredKey | null {
  try {
    const v = JSON.parse(text) as StoredKey;
    return typeof v.hash === "string" && typeof v.name === "string" ? v : null;
  } catch {
    return null;
  }
}

function isConflict(err: unknown): boolean {
  return /wrong last sequence|key exists/i.test(String((err as Error)?.message));
}

export async function ensureKeysBucket(nc: NatsConnection, replicas: number): Promise<void> {
  try {
    await new Kvm(nc).create(KEYS_BUCKET, { history: 1, replicas, storage: "file", description: "Runway API keys per tenant (hashed): <tenant>.<name>" });
  } catch (err) {
    if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
  }
}

/**
 * Per-tenant API keys in `rw_api_keys`: created (the token is answered once, only its digest is
 * stored), listed, revoked (the record stays, `revoked: true`). Every node keeps a copy in memory
 * kept current by a watch of the bucket ({@link WatchedBucket}), so a bearer token is checked
 * without a store read and a revocation holds on every node as soon as its write is watched.
 */
export class ApiKeyStore {
  private kv: KV | undefined;
  private readonly watched = new WatchedBucket<StoredKey>(
    () => this.bucket(),
    (e) => decode(e.string()),
  );

  constructor(private readonly nc: NatsConnection) {}

  private async bucket(): Promise<KV> {
    this.kv ??= await new Kvm(this.nc).open(KEYS_BUCKET);
    return this.kv;
  }

  /** Starts the watch now (the node's start), rather than on the first check. */
  async start(): Promise<void> {
    await this.watched.start();
  }

  /** A new key (a revoked key's name may be taken again: its old token stays refused). */
  async create(tenant: string, spec: { name: string; groups?: string[]; interactive?: boolean }, now: number): Promise<CreateKeyResult> {
    const kv = await this.bucket();
    const key = `${tenant}.${spec.name}`;
    for (let tries = 1; ; tries++) {
      const current = await kv.get(key);
      const old = current?.operation === "PUT" ? decode(current.string()) : null;
      if (old && !old.revoked) return { outcome: "key_exists", key: viewOf(tenant, old) };
      const secret = randomBytes(32).toString("base64url");
      const token = `${PREFIX}.${tenant}.${spec.name}.${secret}`;
      const stored: StoredKey = {
        id: randomUUID().replaceAll("-", "").slice(0, 16),
        name: spec.name,
        groups: [...new Set(spec.groups ?? [])].sort(),
        interactive: spec.interactive === true,
        created_at: now,
        revoked: false,
        last4: secret.slice(-4),
        hash: digest(token),
      };
      try {
        const revision = current ? await kv.update(key, JSON.stringify(stored), current.revision) : await kv.create(key, JSON.stringify(stored));
        this.watched.remember(key, revision, stored);
        return { outcome: "created", key: viewOf(tenant, stored), token };
      } catch (err) {
        if (!isConflict(err) || tries >= MAX_WRITE_TRIES) throw err;
      }
    }
  }

  async list(tenant: string): Promise<ApiKeyView[]> {
    const kv = await this.bucket();
    const out: ApiKeyView[] = [];
    for await (const name of await kv.keys(`${tenant}.*`)) {
      const e = await kv.get(name);
      const stored = e?.operation === "PUT" ? decode(e.string()) : null;
      if (stored) out.push(viewOf(tenant, stored));
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Revokes the key (revision-checked): its token is refused from now on. Undefined: no such key. */
  async revoke(tenant: string, name: string, now: number): Promise<ApiKeyView | undefined> {
    const kv = await this.bucket();
    const key = `${tenant}.${name}`;
    for (let tries = 1; ; tries++) {
      const current = await kv.get(key);
      const old = current?.operation === "PUT" ? decode(current.string()) : null;
      if (!current || !old) return undefined;
      if (old.revoked) return viewOf(tenant, old);
      const stored: StoredKey = { ...old, revoked: true, revoked_at: now };
      try {
        const revision = await kv.update(key, JSON.stringify(stored), current.revision);
        this.watched.remember(key, revision, stored);
        return viewOf(tenant, stored);
      } catch (err) {
        if (!isConflict(err) || tries >= MAX_WRITE_TRIES) throw err;
      }
    }
  }

  /** Who a bearer token is: a live key's caller; undefined for a token that is malformed, unknown, revoked or of a wrong secret. */
  async authenticate(token: string): Promise<KeyCaller | undefined> {
    const m = TOKEN.exec(token);
    if (!m) return undefined;
    const [, tenant, name] = m as unknown as [string, string, string];
    const stored = await this.watched.get(`${tenant}.${name}`);
    if (!stored || stored.revoked) return undefined;
    const given = Buffer.from(digest(token), "hex");
    const held = Buffer.from(stored.hash, "hex");
    if (given.length !== held.length || !timingSafeEqual(given, held)) return undefined;
    return { tenant, name, identity: `key:${tenant}/${name}`, groups: stored.groups, interactive: stored.interactive };
  }

  async close(): Promise<void> {
    await this.watched.close();
  }
}
