import type { NatsConnection } from "@nats-io/transport-node";
import type { AnyMachineSnapshot, EventObject } from "xstate";
import {
  isTenantId,
  MEMBER_PREFIX,
  memberKey,
  tenantKey,
  tenantMachine,
  TenantCommandSchema,
  TenantIdSchema,
  tenantView,
  upgradeTenant,
  type Member,
  type MembershipReader,
  type TenantContext,
  type TenantContextV1,
  type AdmitAnswer,
  type TenantAnswer,
  type TenantEvent,
  type TenantView,
  withGatheredFacts,
} from "../machines/index.js";
import {
  defineActor,
  isRemoval,
  kvSubject,
  partitionBucket,
  partitionOf,
  partitionStream,
  readLast,
  RunwayFault,
  answerOf,
  readActor,
  type ActorHost,
  type AnswerTo,
  type ActorTypes,
  type MailboxClient,
  type RecordFormat,
} from "../runtime/index.js";
import type { z } from "zod";
import { UsageMeter } from "./meter.js";
import { askActor, type AskAnswer } from "./ask.js";
import { actorIdsIn, lastValues } from "./records.js";
import { randomDeliveryId } from "./ids.js";

export const TENANT_KIND = "tenant";

/**
 * The tenant record's format: version 1. A record stored before issue 9 kept its members inside
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

/** What the scheduler needs of a tenant, refreshed at most once a second. */
export interface TenantPolicyView {
  weight: number;
  max_concurrency: number;
  project_max_concurrency: Record<string, number>;
  class_shares?: Record<string, number>;
  killed: boolean;
  draining: boolean;
  provider_quotas: Record<string, { requests_per_minute: number; tokens_per_minute: number }>;
  /** Sources that may start interactive runs (absent in a record stored before the setting). */
  interactive_sources?: readonly string[];
}

/** A tenant whose record stored before issue 9 is still moving its members out: asked again later. */
type MigratingAnswer = Extract<TenantAnswer, { outcome: "migrating" }>;
/** The state a tenant that exists is in: what kill, drain and resume answer with. */
type LiveTenantState = "active" | "draining" | "killed";

/** The tenant answers with these outcomes (see `machines/tenant/events.ts`), picked from its closed answer union. */
type TenantAnswerOf<O extends string> = Extract<TenantAnswer, { outcome: O }> | MigratingAnswer;

/**
 * The tenant actor's protocol: its stored context (a record stored before issue 9 holds its
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

function isMigrating(answer: { outcome: string }): answer is MigratingAnswer {
  return answer.outcome === "migrating";
}

/**
 * A tenant's answer, unless it is `migrating`: a record stored before issue 9 is being moved out
 * of itself for a moment, which is a retryable fault (ask again), never an answer to a caller.
 */
function unlessMigrating<A extends { outcome: string }>(id: string, answer: A): Exclude<A, MigratingAnswer> {
  if (isMigrating(answer))
    throw new RunwayFault("tenant_migrating", `tenant ${id}: membership being migrated (${String(answer.left)} left)`, { kind: "retryable" });
  // Narrowed by the guard above; TypeScript does not narrow a generic union on the false branch.
  return answer as Exclude<A, MigratingAnswer>;
}

/** What a tenant service call answers for command `K`: the tenant's own answer, or why it could not be asked. */
export type TenantReply<K extends keyof TenantTypes["answers"]> =
  | Exclude<AnswerTo<TenantTypes, K>, MigratingAnswer>
  /** An applied command the tenant answered nothing to. */
  | { outcome: "ok" }
  | { outcome: "tenant_not_found" }
  | { outcome: "invalid_input"; reason: string };

/**
 * Tenants as actors (`tenant.<id>` in their partition's bucket). Every command is answered
 * after it is stored; reads go to the record. A request naming an unknown or malformed
 * tenant is answered `tenant_not_found`.
 */
export class TenantService {
  private readonly known = new Map<string, { view: TenantView; at: number }>();
  /** Policy refreshes under way: one read a tenant at a time, however many grants ask meanwhile. */
  private readonly refreshing = new Set<string>();
  private readonly listeners: ((tenant: string) => void)[] = [];

  /** Called whenever a tenant's view is (re)loaded: a node waiting on an unknown tenant's policy goes on. */
  onLoaded(listener: (tenant: string) => void): void {
    this.listeners.push(listener);
  }

  constructor(private readonly deps: { nc: NatsConnection; partitions: number; mailbox: MailboxClient; host?: ActorHost; now(): number }) {}

  private async command<K extends keyof TenantTypes["answers"]>(
    id: string,
    event: { type: K } & Record<string, unknown>,
    commandId = `${event.type}/${id}/${randomDeliveryId()}`,
    trusted = false,
  ): Promise<TenantReply<K>> {
    const answer = answerOf<TenantTypes, K, AskAnswer>(await askActor(this.deps, { kind: TENANT_KIND, id }, event, commandId, 10_000, { trusted }));
    if (answer.outcome === "applied") {
      return unlessMigrating(id, answer.value ?? { outcome: "ok" as const });
    }
    if (answer.outcome === "refused") return { outcome: "tenant_not_found" };
    if (answer.outcome === "invalid_input") return { outcome: "invalid_input", reason: answer.reason };
    throw new RunwayFault("tenant_unavailable", `tenant ${id}: ${answer.outcome}`, { kind: "retryable" });
  }

  async get(id: string): Promise<TenantView | undefined> {
    if (!isTenantId(id)) return undefined;
    const read = await readActor(this.deps, TENANT_RECORD, id);
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
    if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `tenant ${id}: ${read.detail}`);
    if (read.outcome === "missing") return undefined;
    const snapshot = read.snapshot;
    if (!snapshot.context || snapshot.value === "new") return undefined;
    const view = tenantView(snapshot.context);
    const first = !this.known.has(id);
    this.known.set(id, { view, at: this.deps.now() });
    if (first) for (const l of this.listeners) l(id);
    return view;
  }

  async exists(id: string): Promise<boolean> {
    const cached = this.known.get(id);
    if (cached) return true;
    return (await this.get(id)) !== undefined;
  }

  /** The tenant's scheduling policy, from a view at most `maxAgeMs` old. */
  policy(id: string, maxAgeMs = 1_000): TenantPolicyView | undefined {
    const cached = this.known.get(id);
    if ((!cached || this.deps.now() - cached.at > maxAgeMs) && !this.refreshing.has(id)) {
      this.refreshing.add(id);
      void this.get(id)
        .catch(() => undefined)
        .finally(() => this.refreshing.delete(id));
    }
    if (!cached) return undefined;
    const s = cached.view.settings;
    return {
      weight: s.weight,
      max_concurrency: s.max_concurrency,
      project_max_concurrency: s.project_max_concurrency,
      ...(s.class_shares ? { class_shares: s.class_shares as Record<string, number> } : {}),
      killed: cached.view.state === "killed",
      draining: cached.view.state === "draining",
      provider_quotas: s.provider_quotas,
      ...(s.interactive_sources ? { interactive_sources: s.interactive_sources } : {}),
    };
  }

  async create(id: string, settings?: unknown): Promise<TenantReply<"tenant.create">> {
    const valid = TenantIdSchema.safeParse(id);
    if (!valid.success) return { outcome: "invalid_input", reason: `id: ${valid.error.issues.map((i) => i.message).join("; ")}` };
    return this.command(id, { type: "tenant.create", ...(settings ? { settings } : {}) }, `tenant.create/${id}`);
  }

  put(id: string, settings: unknown): Promise<TenantReply<"tenant.put">> {
    return this.command(id, { type: "tenant.put", settings });
  }

  async setState(id: string, to: "kill" | "drain" | "resume", reason: string): Promise<TenantReply<`tenant.${typeof to}`>> {
    const answer = await this.command(id, { type: `tenant.${to}`, reason });
    this.known.delete(id);
    await this.get(id).catch(() => undefined);
    return answer;
  }

  /**
   * `reserveCents`: what the run reserves of a day budget (its definition's `max_cost_cents`;
   * absent: the tenant's default). `fresh`: the run id was made up at random for this start, so
   * the tenant cannot have counted it: its member keys are not read.
   */
  admit(id: string, runId: string, project: string, reserveCents?: number, fresh = false): Promise<TenantReply<"tenant.admit_run">> {
    // A fresh command id each time: the tenant itself counts a run id once, and each caller needs its own answer.
    // Built from a start request the API validated: not parsed again when applied here.
    return this.command(
      id,
      {
        type: "tenant.admit_run",
        run_id: runId,
        project,
        ...(reserveCents !== undefined ? { reserve_cents: reserveCents } : {}),
        ...(fresh ? { fresh: true } : {}),
      },
      undefined,
      true,
    );
  }

  /**
   * Gives back the slot `admit` gave `runId` (`tenant.run_ended`), for a start whose run was
   * never created. Idempotent: the tenant counts a run id's end once.
   */
  runEnded(id: string, runId: string, project: string): Promise<TenantReply<"tenant.run_ended">> {
    return this.command(id, { type: "tenant.run_ended", run_id: runId, project, withdrawn: true }, `release/${runId}/not-created`, true);
  }

  /**
   * Runs the tenant counts (admitted or queued): its member keys, and while a record stored
   * before issue 9 is being migrated, the members still inside it. For the sweep.
   */
  async members(id: string): Promise<{ run: string; project: string }[]> {
    const out = (await listMembers(this.deps.nc, this.deps.partitions, id)).map((m) => ({ run: m.run, project: m.member.p }));
    const read = await readActor(this.deps, TENANT_RECORD, id);
    const legacy = read.outcome === "found" && read.snapshot.context ? upgradeTenant(read.snapshot.context).legacy : undefined;
    if (legacy) for (const [run, project] of [...legacy.running, ...legacy.queue]) out.push({ run, project });
    return out;
  }

  async list(): Promise<TenantView[]> {
    const out: TenantView[] = [];
    for (let p = 0; p < this.deps.partitions; p++) {
      for (const id of await actorIdsIn(this.deps.nc, p, TENANT_KIND)) {
        const view = await this.get(id);
        if (view) out.push(view);
      }
    }
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }
}
