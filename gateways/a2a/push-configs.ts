import { createHash } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { z } from "zod";
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

/**
 * A stored config with its delivery's progress: `cursor` is the id of the last journal event of
 * the task's run that was delivered (null: from the journal's start), `sent` the task state last
 * POSTed, `snapshot` that the task as it is now is to be POSTed first (a config created on a task
 * already under way). `lease` is the node delivering it, until when; `done` once the terminal
 * state was delivered, `gave_up` when the receiver refused every retry.
 */
const PushRecordSchema = z.object({
  id: z.string(),
  task_id: z.string(),
  url: z.string(),
  token: z.string().optional(),
  authentication: z.object({ scheme: z.string(), credentials: z.string() }).optional(),
  created_at: z.number(),
  cursor: z.string().nullable(),
  sent: z.object({ state: z.number(), ref: z.string().optional() }).nullable(),
  artifacts: z.array(z.string()),
  snapshot: z.boolean(),
  done: z.boolean().optional(),
  gave_up: z.object({ at: z.number(), reason: z.string() }).optional(),
  lease: z.object({ owner: z.string(), until: z.number() }).optional(),
});
export type PushRecord = z.infer<typeof PushRecordSchema>;

export interface PushEntry {
  key: string;
  record: PushRecord;
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

function decode(data: Uint8Array): PushRecord | undefined {
  try {
    const parsed = PushRecordSchema.safeParse(JSON.parse(new TextDecoder().decode(data)));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The push configs in `rw_a2a_push`; every write of a delivery's progress is fenced by the entry's revision. */
export class PushConfigs {
  private kv: Promise<KV> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  bucket(): Promise<KV> {
    return (this.kv ??= new Kvm(this.nc).open(PUSH_BUCKET));
  }

  static key(tenant: string, agent: string, task: string, id: string): string {
    return `${tenant}.${agent}.${task}.${id}`;
  }

  async get(key: string): Promise<PushEntry | undefined> {
    const e = await (await this.bucket()).get(key);
    if (!e || e.operation !== "PUT" || e.length === 0) return undefined;
    const record = decode(e.value);
    return record ? { key, record, revision: e.revision } : undefined;
  }

  /** Stores a new config, or a config's new settings (url, token, authentication; the delivery's progress kept). */
  async put(key: string, fresh: PushRecord): Promise<PushRecord> {
    const kv = await this.bucket();
    for (;;) {
      const known = await this.get(key);
      if (!known) {
        try {
          await kv.create(key, JSON.stringify(fresh));
          return fresh;
        } catch {
          continue;
        }
      }
      const { token: _t, authentication: _a, ...kept } = known.record;
      const record: PushRecord = {
        ...kept,
        url: fresh.url,
        ...(fresh.token ? { token: fresh.token } : {}),
        ...(fresh.authentication ? { authentication: fresh.authentication } : {}),
      };
      try {
        await kv.update(key, JSON.stringify(record), known.revision);
        return record;
      } catch {
        // Written meanwhile (a delivery's progress): read again.
      }
    }
  }

  /** Stores the config unless one is there (a resend's config is the first's). */
  async createIfAbsent(key: string, record: PushRecord): Promise<void> {
    try {
      await (await this.bucket()).create(key, JSON.stringify(record));
    } catch (err) {
      if (!(await this.get(key))) throw err;
    }
  }

  /** Writes the record if the entry is still at `revision`: its new revision, or undefined when it moved on (deleted, or taken). */
  async update(key: string, record: PushRecord, revision: number): Promise<number | undefined> {
    try {
      return await (await this.bucket()).update(key, JSON.stringify(record), revision);
    } catch (err) {
      if (/wrong last sequence|10071|10164/i.test(String((err as Error).message))) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<boolean> {
    if (!(await this.get(key))) return false;
    await (await this.bucket()).delete(key);
    return true;
  }

  /** Every config under a key filter (`<tenant>.<agent>.<task>.*`, or `>` for all). */
  async list(filter: string): Promise<PushEntry[]> {
    await this.bucket();
    const out: PushEntry[] = [];
    for (const v of await lastValues(this.nc, PUSH_BUCKET, filter)) {
      if (v.data.length === 0) continue;
      const record = decode(v.data);
      if (record) out.push({ key: v.key, record, revision: v.revision });
    }
    return out;
  }
}
