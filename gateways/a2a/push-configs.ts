import { createHash } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { z } from "zod";
import type { TaskPushNotificationConfig } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import { lastValues } from "../../actors/index.js";

/** Bucket of the tasks' push-notification configs: one key per config, `<tenant>.<agent>.<task id>.<config id>`. */
export const PUSH_BUCKET = "rw_a2a_push";
/** Configs a task may have at once. */
export const MAX_PUSH_CONFIGS = 10;

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** A webhook URL: https, or plain http only to this machine (loopback), with no credentials in it. */
export const PushUrlSchema = z
  .string()
  .min(1, "a url is required")
  .max(2048)
  .refine((text) => {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return false;
    }
    if (url.username || url.password) return false;
    return url.protocol === "https:" || (url.protocol === "http:" && LOOPBACK.test(url.hostname));
  }, "the url is https, or http to a loopback address (127.0.0.1, localhost, [::1]), without credentials");

/** What a client asks for: where to POST, the token echoed in `X-A2A-Notification-Token`, and the `Authorization` to send. */
export const PushSettingsSchema = z.object({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "a config id is 1 to 64 letters, digits, '-' or '_'")
    .optional(),
  url: PushUrlSchema,
  token: z
    .string()
    .max(1024)
    .regex(/^[\x21-\x7e]*$/, "the token is printable ASCII without spaces")
    .optional(),
  authentication: z
    .object({
      scheme: z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, "an HTTP authentication scheme (e.g. Bearer)"),
      credentials: z
        .string()
        .max(4096)
        .regex(/^[\x20-\x7e]*$/, "credentials are printable ASCII"),
    })
    .optional(),
});
export type PushSettings = z.infer<typeof PushSettingsSchema>;

/** A stored config: what a client set (the key names its tenant, agent and task). */
const PushConfigSchema = z.object({
  id: z.string(),
  task_id: z.string(),
  url: z.string(),
  token: z.string().optional(),
  authentication: z.object({ scheme: z.string(), credentials: z.string() }).optional(),
  created_at: z.number(),
});
export type PushConfig = z.infer<typeof PushConfigSchema>;

/**
 * A config's delivery, kept under its own key (written on every delivered event, so the configs'
 * keys stay still for listing): `cursor` is the id of the last journal event of the task's run
 * whose delivery is done (null: from the journal's start), `sent` the task state last POSTed,
 * `snapshot` that the task as it is now is to be POSTed first (a config created on a task already
 * under way). `lease` is the node delivering it, until when; `done` once the terminal state was
 * delivered, `gave_up` when the receiver refused every retry.
 */
const DeliverySchema = z.object({
  cursor: z.string().nullable(),
  sent: z.object({ state: z.number(), ref: z.string().optional() }).nullable(),
  artifacts: z.array(z.string()),
  snapshot: z.boolean(),
  done: z.boolean().optional(),
  gave_up: z.object({ at: z.number(), reason: z.string() }).optional(),
  lease: z.object({ owner: z.string(), until: z.number() }).optional(),
});
export type Delivery = z.infer<typeof DeliverySchema>;

export interface Versioned<T> {
  key: string;
  record: T;
  revision: number;
}

/** The parts of a config's key. */
export function keyParts(key: string): { tenant: string; agent: string; task: string; id: string } | undefined {
  const p = key.split(".");
  return p.length === 4 ? { tenant: p[0]!, agent: p[1]!, task: p[2]!, id: p[3]! } : undefined;
}

/** The config id of a SendMessage's push config given without one: the same for a resend of the message. */
export function messageConfigId(messageId: string): string {
  return `msg-${createHash("sha256").update(messageId).digest("hex").slice(0, 24)}`;
}

function decoder<T>(schema: z.ZodType<T>): (data: Uint8Array) => T | undefined {
  return (data) => {
    try {
      const parsed = schema.safeParse(JSON.parse(new TextDecoder().decode(data)));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  };
}
const decodeConfig = decoder(PushConfigSchema);
const decodeDelivery = decoder(DeliverySchema);

/**
 * The push configs in `rw_a2a_push`: a config at `c.<tenant>.<agent>.<task>.<id>`, its delivery at
 * `d.<…same…>`. Every write of a delivery is fenced by its entry's revision.
 */
export class PushConfigs {
  private kv: Promise<KV> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  private bucket(): Promise<KV> {
    return (this.kv ??= new Kvm(this.nc).open(PUSH_BUCKET));
  }

  static key(tenant: string, agent: string, task: string, id: string): string {
    return `${tenant}.${agent}.${task}.${id}`;
  }

  private async read<T>(prefix: "c" | "d", key: string, decode: (data: Uint8Array) => T | undefined): Promise<Versioned<T> | undefined> {
    const e = await (await this.bucket()).get(`${prefix}.${key}`);
    if (!e || e.operation !== "PUT" || e.length === 0) return undefined;
    const record = decode(e.value);
    return record ? { key, record, revision: e.revision } : undefined;
  }

  get(key: string): Promise<Versioned<PushConfig> | undefined> {
    return this.read("c", key, decodeConfig);
  }

  delivery(key: string): Promise<Versioned<Delivery> | undefined> {
    return this.read("d", key, decodeDelivery);
  }

  /**
   * Stores a config (a config of that id gets the new settings): its delivery first, kept if there
   * is one (`fresh` otherwise; one that was given up on goes on), so a listed config always has one.
   */
  async put(key: string, config: PushConfig, fresh: Delivery): Promise<PushConfig> {
    const kv = await this.bucket();
    await kv.create(`d.${key}`, JSON.stringify(fresh)).catch(async (err: unknown) => {
      const known = await this.delivery(key);
      if (!known) throw err;
      // A delivery given up on is tried again with the new settings, from where it stopped.
      if (known.record.gave_up) {
        const { gave_up: _g, lease: _l, ...resumed } = known.record;
        await this.updateDelivery(key, resumed, known.revision);
      }
    });
    const known = await this.get(key);
    const stored = known ? { ...config, created_at: known.record.created_at } : config;
    await kv.put(`c.${key}`, JSON.stringify(stored));
    return stored;
  }

  /** Stores the config unless one is there (a resend's config is the first's). */
  async createIfAbsent(key: string, config: PushConfig, fresh: Delivery): Promise<void> {
    if (await this.get(key)) return;
    await this.put(key, config, fresh);
  }

  /** Writes the delivery if its entry is still at `revision`: its new revision, or undefined when it moved on (deleted, or taken). */
  async updateDelivery(key: string, record: Delivery, revision: number): Promise<number | undefined> {
    try {
      return await (await this.bucket()).update(`d.${key}`, JSON.stringify(record), revision);
    } catch (err) {
      if (/wrong last sequence|10071|10164/i.test(String((err as Error).message))) return undefined;
      throw err;
    }
  }

  /** Deletes a config and its delivery: true when there was one. */
  async delete(key: string): Promise<boolean> {
    const known = await this.get(key);
    const kv = await this.bucket();
    if (known) await kv.delete(`c.${key}`);
    await kv.delete(`d.${key}`);
    return known !== undefined;
  }

  /** Every config under a key filter (`<tenant>.<agent>.<task>.*`, or `>` for all). */
  async list(filter: string): Promise<Versioned<PushConfig>[]> {
    await this.bucket();
    const out: Versioned<PushConfig>[] = [];
    for (const v of await lastValues(this.nc, PUSH_BUCKET, `c.${filter}`)) {
      if (v.data.length === 0) continue;
      const record = decodeConfig(v.data);
      if (record) out.push({ key: v.key.slice(2), record, revision: v.revision });
    }
    return out;
  }
}

/** A client's push config, checked: InvalidParams (the SDK's RequestMalformedError, -32602 / 400) when it is not one this server POSTs to. */
export function pushSettingsOf(config: TaskPushNotificationConfig): PushSettings {
  const parsed = PushSettingsSchema.safeParse({
    ...(config.id ? { id: config.id } : {}),
    url: config.url ?? "",
    ...(config.token ? { token: config.token } : {}),
    ...(config.authentication ? { authentication: config.authentication } : {}),
  });
  if (!parsed.success) throw new RequestMalformedError(`push notification config: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  return parsed.data;
}

/** A stored config as the client sees it: the authentication's scheme, never its credentials. */
export function configOf(tenant: string, r: PushConfig): TaskPushNotificationConfig {
  return {
    tenant,
    id: r.id,
    taskId: r.task_id,
    url: r.url,
    token: r.token ?? "",
    authentication: r.authentication ? { scheme: r.authentication.scheme, credentials: "" } : undefined,
  };
}

/** A config's delivery before its first update: from the journal event after `cursor` (null: the first), the task as it is first when `snapshot`. */
export function freshDelivery(cursor: string | null, snapshot: boolean): Delivery {
  return { cursor, sent: null, artifacts: [], snapshot };
}
