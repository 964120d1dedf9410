import type { NatsConnection } from "@nats-io/transport-node";
import type { AnyMachineSnapshot, EventObject } from "xstate";
import {
  MEMBER_PREFIX,
  memberKey,
  tenantKey,
  tenantMachine,
  TenantCommandSchema,
  type Member,
  type MembershipReader,
  type TenantContext,
  type TenantContextV1,
  type TenantEvent,
  type AdmitAnswer,
  type TenantAnswer,
  withGatheredFacts,
} from "../../machines/index.js";
import {
  defineActor,
  isRemoval,
  kvSubject,
  partitionBucket,
  partitionOf,
  partitionStream,
  readLast,
  RunwayFault,
  type ActorHost,
  type ActorTypes,
  type RecordFormat,
} from "../../runtime/index.js";
import type { z } from "zod";
import { UsageMeter } from "./meter.js";
import { lastValues } from "../records/index.js";

export const TENANT_KIND = "tenant";

/**
 * The tenant record's format: version 1. An older-format record kept its members inside
 * itself; its machine moves them out over a few of its own transitions (`machines/tenant/migrate.ts`),
 * since that writes keys beside the record: not a step of the migration table.
 */
export const TENANT_RECORD: RecordFormat<TenantTypes> = { kind: TENANT_KIND };

export interface TenantActorOptions {
  /** The node's connection (the actor is defined before it exists). */
  nc(): NatsConnection;
  partitions(): number;
  /** How long a tenant remembers an ended run, so a late duplicate admission is answered and not counted (default 7 days). */
  endedRunRetentionMs?: number;
  /** The node's host: a tenant served here reads its member keys through it (from memory when it wrote them itself). */
  host?(): ActorHost;
}

/**
 * The tenant actor: settings, kill switch and drain, day cap, run concurrency admission and the
 * queue, expansion admission. Its record holds counters; its members are keys beside it
 * (`machines/tenant/members.ts`), read by `prepare` before each decision (the facts) and
 * written after each write. Commands queued together share one write; each decision reads the
 * keys of the batch's earlier commands from what they wrote (`written`), the rest from the store.
 */
export function tenantActor(options: TenantActorOptions) {
  return defineActor<typeof tenantMachine, TenantTypes>({
    ...TENANT_RECORD,
    machine: tenantMachine,
    events: TenantCommandSchema,
    input: (id: string) => ({ id }),
    // Commands queued together share one record write; each decision reads the member keys of
    // the ones before it from `written` (they land after the record).
    maxBatch: 32,
    // A run's report (ended, expansions) is applied in the run's lane when this node serves the tenant.
    inbox: "memory",
    prepare: async (event: EventObject, current: AnyMachineSnapshot | undefined, _pending: readonly unknown[], written: ReadonlyMap<string, unknown>) => {
      const context = current?.context as TenantContext | TenantContextV1 | undefined;
      const withRetention = options.endedRunRetentionMs !== undefined ? { ...event, retention_ms: options.endedRunRetentionMs } : event;
      // A tenant not created yet refuses everything but its create, which reads nothing.
      if (!context || current?.value === "new") return withRetention;
      const reader = membershipReader(options.nc(), options.partitions(), context.id, options.host?.(), written);
      // The event its decision was made on: the machine gets that decision back instead of making it again.
      return withGatheredFacts(context, withRetention as TenantEvent, reader);
    },
  });
}

const decoder = new TextDecoder();

function decodeJson(data: Uint8Array): unknown {
  return JSON.parse(decoder.decode(data)) as unknown;
}

/**
 * The tenant's membership keys as its decisions read them: from the stream leader, so the owner
 * sees its own last writes; through `host` (the owner's own record of what it wrote) when given.
 */
/**
 * `written`: member keys the batch's earlier commands gave values not stored yet (full keys):
 * read before the store, and laid over the listing that counts running runs.
 */
export function membershipReader(
  nc: NatsConnection,
  partitions: number,
  tenant: string,
  host?: ActorHost,
  written: ReadonlyMap<string, unknown> = new Map(),
): MembershipReader {
  const p = partitionOf(tenant, partitions);
  const stream = partitionStream(p);
  const bucket = partitionBucket(p);
  const meter = new UsageMeter(nc);
  const address = { kind: TENANT_KIND, id: tenant };
  return {
    read: async (keys) => {
      const values = await Promise.all(
        keys.map(async (key) => {
          const full = tenantKey(tenant, key);
          if (written.has(full)) return [key, written.get(full) ?? null] as const;
          const read = host ? await host.readOwn(address, tenantKey(tenant, key)) : await readLast(nc, stream, kvSubject(bucket, tenantKey(tenant, key)));
          if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", `tenant ${tenant} ${key}: ${read.detail}`, { kind: "retryable" });
          if (read.outcome === "missing") return [key, null] as const;
          return [key, isRemoval(read.message) ? null : decodeJson(read.message.data)] as const;
        }),
      );
      return Object.fromEntries(values);
    },
    spentOn: (day) => meter.spentOn(tenant, day),
    runningByProject: async () => {
      const members = new Map<string, Member | null>((await listMembers(nc, partitions, tenant)).map((m) => [tenantKey(tenant, memberKey(m.run)), m.member]));
      const prefix = tenantKey(tenant, MEMBER_PREFIX);
      for (const [key, value] of written) if (key.startsWith(prefix)) members.set(key, value as Member | null);
      const counts: Record<string, number> = {};
      for (const member of members.values()) if (member?.s === "r") counts[member.p] = (counts[member.p] ?? 0) + 1;
      return counts;
    },
  };
}

/** A run a tenant counts (admitted or queued), as its member key says. */
export interface TenantMember {
  run: string;
  member: Member;
}

/** Every member key of `tenant` (one listing of `tenant.<id>.m.*`): its running and queued runs. */
export async function listMembers(nc: NatsConnection, partitions: number, tenant: string): Promise<TenantMember[]> {
  const prefix = tenantKey(tenant, MEMBER_PREFIX);
  const out: TenantMember[] = [];
  for (const v of await lastValues(nc, partitionBucket(partitionOf(tenant, partitions)), `${prefix}*`)) {
    out.push({ run: runOfMemberKey(v.key), member: decodeJson(v.data) as Member });
  }
  return out;
}

/**
 * The run id a member key names, whether given as a key or as its KV subject: its last token,
 * decoded (the inverse of `keyToken`: `=` and base64url for an id that is not key-safe).
 */
export function runOfMemberKey(key: string): string {
  const token = key.slice(key.lastIndexOf(".") + 1);
  if (!token.startsWith("=")) return token;
  return Buffer.from(token.slice(1), "base64url").toString("utf8");
}

/** A tenant whose older-format record is still moving its members out: asked again later. */
type MigratingAnswer = Extract<TenantAnswer, { outcome: "migrating" }>;
/** The state a tenant that exists is in: what kill, drain and resume answer with. */
type LiveTenantState = "active" | "draining" | "killed";

/** The tenant answers with these outcomes (see `machines/tenant/events.ts`), picked from its closed answer union. */
type TenantAnswerOf<O extends string> = Extract<TenantAnswer, { outcome: O }> | MigratingAnswer;

/**
 * The tenant actor's protocol: its stored context (an older-format record holds its
 * members itself), its commands, and per command the value its `runway.answer` carries.
 */
export interface TenantTypes extends ActorTypes {
  state: TenantContext | TenantContextV1;
  commands: z.input<typeof TenantCommandSchema>;
  answers: {
    "tenant.create": TenantAnswerOf<"created" | "exists" | "invalid_input">;
    "tenant.put": TenantAnswerOf<"updated" | "invalid_input">;
    "tenant.kill": TenantAnswerOf<LiveTenantState>;
    "tenant.drain": TenantAnswerOf<LiveTenantState>;
    "tenant.resume": TenantAnswerOf<LiveTenantState>;
    "tenant.admit_run": AdmitAnswer | MigratingAnswer;
    "tenant.run_ended": TenantAnswerOf<"ended" | "not_running">;
    "tenant.recheck": TenantAnswerOf<"admitted" | "queued" | "unknown">;
    "tenant.admit_expansion": TenantAnswerOf<"expansion_admitted" | "expansion_refused">;
    "tenant.release_expansion": TenantAnswerOf<"expansion_released" | "not_held">;
    "tenant.promote": TenantAnswerOf<"promoted" | "migrated">;
    "tenant.migrate": TenantAnswerOf<"promoted" | "migrated">;
  };
}
