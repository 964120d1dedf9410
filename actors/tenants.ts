import type { NatsConnection } from "@nats-io/transport-node";
import { isTenantId, tenantMachine, TenantCommandSchema, TenantIdSchema, tenantView, type TenantContext, type TenantView } from "../machines/index.js";
import { defineActor, RunwayFault, type ActorHost, type MailboxClient } from "../runtime/index.js";
import { askActor } from "./ask.js";
import { actorIdsIn, readSnapshot } from "./records.js";
import { randomDeliveryId } from "./ids.js";

export const TENANT_KIND = "tenant";

/** The tenant actor: settings, kill switch and drain, day cap and run concurrency admission. */
export const tenantActor = defineActor({ kind: TENANT_KIND, machine: tenantMachine, events: TenantCommandSchema, input: (id: string) => ({ id }) });

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

type Answer = { outcome: string } & Record<string, unknown>;

/**
 * Tenants as actors (`tenant.<id>` in their partition's bucket). Every command is answered
 * after it is stored; reads go to the record. A request naming an unknown or malformed
 * tenant is answered `tenant_not_found`.
 */
export class TenantService {
  private readonly known = new Map<string, { view: TenantView; at: number }>();
  private readonly listeners: ((tenant: string) => void)[] = [];

  /** Called whenever a tenant's view is (re)loaded: a node waiting on an unknown tenant's policy goes on. */
  onLoaded(listener: (tenant: string) => void): void {
    this.listeners.push(listener);
  }

  constructor(private readonly deps: { nc: NatsConnection; partitions: number; mailbox: MailboxClient; host?: ActorHost; now(): number }) {}

  private async command(
    id: string,
    event: { type: string } & Record<string, unknown>,
    commandId = `${event.type}/${id}/${randomDeliveryId()}`,
  ): Promise<Answer> {
    const answer = await askActor(this.deps, { kind: TENANT_KIND, id }, event, commandId, 10_000);
    if (answer.outcome === "applied") return (answer.value as Answer | undefined) ?? { outcome: "ok" };
    if (answer.outcome === "refused") return { outcome: "tenant_not_found" };
    if (answer.outcome === "invalid_input") return { outcome: "invalid_input", reason: answer.reason };
    throw new RunwayFault("tenant_unavailable", `tenant ${id}: ${answer.outcome}`, { kind: "retryable" });
  }

  async get(id: string): Promise<TenantView | undefined> {
    if (!isTenantId(id)) return undefined;
    const read = await readSnapshot<TenantContext>(this.deps.nc, this.deps.partitions, TENANT_KIND, id);
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
    if (!cached || this.deps.now() - cached.at > maxAgeMs) void this.get(id).catch(() => undefined);
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

  async create(id: string, settings?: unknown): Promise<Answer> {
    const valid = TenantIdSchema.safeParse(id);
    if (!valid.success) return { outcome: "invalid_input", reason: `id: ${valid.error.issues.map((i) => i.message).join("; ")}` };
    return this.command(id, { type: "tenant.create", ...(settings ? { settings } : {}) }, `tenant.create/${id}`);
  }

  put(id: string, settings: unknown): Promise<Answer> {
    return this.command(id, { type: "tenant.put", settings });
  }

  async setState(id: string, to: "kill" | "drain" | "resume", reason: string): Promise<Answer> {
    const answer = await this.command(id, { type: `tenant.${to}`, reason });
    this.known.delete(id);
    await this.get(id).catch(() => undefined);
    return answer;
  }

  admit(id: string, runId: string, project: string): Promise<Answer> {
    // A fresh command id each time: the tenant itself counts a run id once, and each caller needs its own answer.
    return this.command(id, { type: "tenant.admit_run", run_id: runId, project });
  }

  /**
   * Gives back the slot `admit` gave `runId` (`tenant.run_ended`), for a start whose run was
   * never created. Idempotent: the tenant counts a run id's end once.
   */
  runEnded(id: string, runId: string, project: string): Promise<Answer> {
    return this.command(id, { type: "tenant.run_ended", run_id: runId, project }, `release/${runId}/not-created`);
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
