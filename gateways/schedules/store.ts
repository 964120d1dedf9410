import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import type { ScheduleState } from "../../machines/index.js";

export const SCHEDULES_BUCKET = "rw_schedules";

/** A schedule's record as stored: its tenant and its state (spec and firing cursor). */
export interface ScheduleRecord extends ScheduleState {
  tenant: string;
}

/** A record with the revision it was read at: the fence of its next write. */
export interface StoredSchedule {
  key: string;
  revision: number;
  record: ScheduleRecord;
}

export function scheduleKey(tenant: string, name: string): string {
  return `${tenant}.${name}`;
}

/** JetStream's "wrong last sequence": the record moved since it was read (10071), or a create found one (10164 on older servers). */
function isConflict(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 10071 || code === 10164 || /wrong last sequence/i.test(String(err));
}

/**
 * Schedules in bucket `rw_schedules`, key `<tenant>.<name>`, one JSON record each. Every write
 * is fenced on the revision it was decided from (a create on there being none), so the API and
 * the firing node never overwrite each other's decision: the loser reads again and decides again.
 */
export class ScheduleStore {
  private kv: KV | undefined;

  constructor(private readonly nc: NatsConnection) {}

  async bucket(): Promise<KV> {
    this.kv ??= await new Kvm(this.nc).open(SCHEDULES_BUCKET);
    return this.kv;
  }

  async read(key: string): Promise<StoredSchedule | undefined> {
    const e = await (await this.bucket()).get(key);
    if (!e || e.operation !== "PUT") return undefined;
    return { key, revision: e.revision, record: e.json<ScheduleRecord>() };
  }

  /** Writes `record` if the key still stands at `revision` (undefined: absent): the new revision, or `conflict` when it does not. */
  async write(key: string, record: ScheduleRecord, revision: number | undefined): Promise<number | "conflict"> {
    const kv = await this.bucket();
    const body = JSON.stringify(record);
    try {
      return revision === undefined ? await kv.create(key, body) : await kv.update(key, body, revision);
    } catch (err) {
      if (isConflict(err)) return "conflict";
      throw err;
    }
  }

  /** Removes the record if it still stands at `revision`. */
  async remove(key: string, revision: number): Promise<"removed" | "conflict"> {
    try {
      await (await this.bucket()).purge(key, { previousSeq: revision });
      return "removed";
    } catch (err) {
      if (isConflict(err)) return "conflict";
      throw err;
    }
  }

  async keysOf(tenant: string): Promise<string[]> {
    const out: string[] = [];
    for await (const key of await (await this.bucket()).keys(`${tenant}.*`)) out.push(key);
    return out.sort();
  }
}

export async function ensureSchedulesBucket(nc: NatsConnection, replicas: number): Promise<void> {
  try {
    await new Kvm(nc).create(SCHEDULES_BUCKET, { history: 1, replicas, storage: "file", description: "Runway schedules per tenant: <tenant>.<name>" });
  } catch (err) {
    if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
  }
}
