import type { NatsConnection } from "@nats-io/transport-node";
import { isTenantId, TenantIdSchema, tenantView, upgradeTenant, utcDay, type TenantAnswer, type TenantView } from "../../machines/index.js";
import { answerOf, readActor, RunwayFault, type ActorHost, type AnswerTo, type MailboxClient } from "../../runtime/index.js";
import { actorIdsIn, listMembers, randomDeliveryId, TENANT_KIND, TENANT_RECORD, UsageMeter, type TenantTypes } from "../../actors/index.js";
import { askActor, type AskAnswer } from "./ask.js";

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

/** A tenant whose older-format record is still moving its members out: asked again later. */
type MigratingAnswer = Extract<TenantAnswer, { outcome: "migrating" }>;

function isMigrating(answer: { outcome: string }): answer is MigratingAnswer {
  return answer.outcome === "migrating";
}

/**
 * A tenant's answer, unless it is `migrating`: an older-format record moving its members out is a
 * retryable fault for a moment (ask again), never an answer to a caller.
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

  private readonly meter: UsageMeter;

  constructor(private readonly deps: { nc: NatsConnection; partitions: number; mailbox: MailboxClient; host?: ActorHost; now(): number }) {
    this.meter = new UsageMeter(deps.nc);
  }

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
    const view = tenantView(snapshot.context, this.deps.now());
    const first = !this.known.has(id);
    this.known.set(id, { view, at: this.deps.now() });
    if (first) for (const l of this.listeners) l(id);
    return view;
  }

  /**
   * The tenant as `tenant.get` answers it: its view at today's UTC day, with `spent_cents`, what
   * its runs spent today on the meter (the figure admission checks against the day budget, beside
   * `reserved_cents`). One meter read more than `get`, so only for callers who asked.
   */
  async show(id: string): Promise<(TenantView & { spent_cents: number }) | undefined> {
    const view = await this.get(id);
    if (!view) return undefined;
    const spent = await this.meter.spentOn(id, utcDay(this.deps.now())).catch((err: unknown) => {
      throw new RunwayFault("store_unavailable", `tenant ${id}: ${String(err)}`, { kind: "retryable" });
    });
    return { ...view, spent_cents: spent };
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
    // A fresh command id, as every other command: the tenant answers a second create `exists`
    // itself; one id for every create would meet the duplicate windows and answer a fault.
    return this.command(id, { type: "tenant.create", ...(settings ? { settings } : {}) });
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
   * Runs the tenant counts (admitted or queued): its member keys, and while an older-format
   * record is being migrated, the members still inside it. For the sweep.
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
