import type { NatsConnection } from "@nats-io/transport-node";
import { heldForAdmission, laneFor, validateAgainstSchema, type LaneDecision, type RunLane, type TraceContext } from "../../machines/index.js";
import { jsonBytes, publish, RunwayFault, type ActorHost, type MailboxClient } from "../../runtime/index.js";
import {
  randomDeliveryId,
  runIdFor,
  startKey,
  type DefinitionStore,
  type ResolveResult,
  type LiveRunIndex,
  type RunSummary,
  type RunView,
} from "../../actors/index.js";
import type { RunHandles } from "./run-handles.js";
import type { RunReads } from "./run-reads.js";
import type { EarlyAdmission, EarlyAdmissions } from "./early-admission.js";
import type { StartRunRequest } from "./schemas.js";
import type { TenantService } from "./tenant-service.js";

export const MAX_INPUT_BYTES = 32 * 1024;

/** The API's runs.start request (schemas.ts), or a replay of a run (RunReplays: not offered by the API). */
export type StartRun = StartRunRequest & {
  replay_of?: string;
  /** The authenticated caller who starts it (an API key's identity): recorded as the run's initiator. */
  initiator?: string;
  /** The W3C trace context its start came with (a `traceparent` header): the run's root span is its child. */
  trace?: TraceContext;
  /** The lane its caller's identity grants (an API key's), in place of the one the request names or its source implies (C037). */
  granted_lane?: RunLane;
};

/** The closed answers of `start` (seed 004's StartRunResult, adapted). Never an exception for these. */
export type StartRunResult =
  | { outcome: "started"; run: RunSummary }
  | { outcome: "duplicate"; run: RunView }
  | { outcome: "tenant_not_found" }
  | { outcome: "definition_not_found" }
  | { outcome: "definition_not_published"; reason: string }
  | { outcome: "input_too_large"; bytes: number; limit: number }
  | { outcome: "invalid_input"; reason: string }
  /** The request named the interactive lane from a source the tenant does not allow it. */
  | { outcome: "lane_not_allowed"; reason: string }
  /** The tenant's kill switch is on, it is draining, its day cap or day budget is spent, or its queue is full: no run is created. */
  | { outcome: "tenant_killed" | "tenant_draining" | "day_cap_reached" | "budget_exhausted" | "queue_full"; detail?: unknown };

/** What starting a run needs (and so what the run service is built from). */
export interface RunStartDeps {
  nc: NatsConnection;
  partitions: number;
  mailbox: MailboxClient;
  host?: ActorHost;
  definitions: DefinitionStore;
  tenants: TenantService;
  /** The live-run index, added to beside the admission (without it, the run actor adds the entry itself). */
  live?: LiveRunIndex;
  now(): number;
}

/** A start as planned before anything is read (RunStarts.planStart). */
interface StartPlan {
  key: string;
  id: string;
  input: unknown;
  bytes: number;
  source: string;
  lane: LaneDecision;
  project: string;
  early: EarlyAdmission | undefined;
  /** Its start key is known to have made no run yet (see `StartOptions.newKey`): nothing to look up or read first. */
  newKey: boolean;
}

/** What a caller in this process knows of a start beyond its request (never from the wire). */
export interface StartOptions {
  /**
   * The start key is new: its caller has just created the one record that precedes any run of it
   * (an A2A task's record, created only if absent). The start then reads no run of the key first,
   * and its run actor decides it as new (a record there after all is refused by the store and
   * decided on: the same answer, one read later). Its tenant still looks for the key's run: a
   * count is never made twice on a caller's word.
   */
  newKey?: boolean;
}

/** The definition version a start resolved, and the lane it runs in. */
type Resolved = Extract<ResolveResult, { outcome: "found" }> & { lane: RunLane };

/** A start its tenant admitted, queued or left to a person (held): under which key and id, and what its seed says of it. */
interface Admitted {
  outcome: "admitted";
  key: string;
  id: string;
  ceiling: number | undefined;
  queued: boolean;
  counted: boolean;
  indexed: boolean;
}

/** Starting runs: planning a start, reading its definition, its tenant's admission, the run actor's create. */
export class RunStarts {
  constructor(
    private readonly deps: RunStartDeps,
    private readonly reads: RunReads,
    private readonly runs: RunHandles,
    private readonly early: EarlyAdmissions,
  ) {}

  /**
   * Starts a run: the start is planned (key, id, lane, an early admission), its definition and
   * any run its start key made are read, its tenant admits it, and the run actor creates it.
   */
  async start(tenant: string, request: StartRun, options: StartOptions = {}): Promise<StartRunResult> {
    if (!(await this.deps.tenants.exists(tenant))) return { outcome: "tenant_not_found" };
    const plan = this.planStart(tenant, request, options.newKey === true && request.start_key !== undefined);
    const checked = await this.checkStart(tenant, request, plan);
    if (checked.outcome !== "found") return checked;
    const admitted = await this.admitStart(tenant, request, plan, checked);
    if (admitted.outcome === "refused") return admitted.answer;
    return this.createRun(tenant, request, plan, checked, admitted);
  }

  /** What a start is decided on before anything is read; an early admission is asked at once when the start may use one. */
  private planStart(tenant: string, request: StartRun, newKey: boolean): StartPlan {
    const key = request.start_key ? startKey(request.start_key.source, request.start_key.delivery_id) : startKey("api", randomDeliveryId());
    const id = runIdFor(tenant, key);
    const input = request.input ?? {};
    const bytes = jsonBytes(input);
    const source = request.source ?? request.start_key?.source ?? "api";
    const lane: LaneDecision = request.granted_lane
      ? { ok: true, lane: request.granted_lane }
      : laneFor(request.lane, source, this.deps.tenants.policy(tenant)?.interactive_sources);
    const project = request.project ?? "default";
    const early = request.start_key || bytes > MAX_INPUT_BYTES || !lane.ok ? undefined : this.early.admit(tenant, id, project, request, input);
    return { key, id, input, bytes, source, lane, project, early, newKey };
  }

  /**
   * The definition and a run this start key already made, read side by side, and the refusals
   * that need no admission. An early admission is given back with any refusal.
   */
  private async checkStart(tenant: string, request: StartRun, plan: StartPlan): Promise<Resolved | Exclude<StartRunResult, { outcome: "started" }>> {
    const { early, input, bytes, lane } = plan;
    const [resolved, existing] = await Promise.all([
      this.deps.definitions.resolve(tenant, request.definition, request.version),
      request.start_key && !plan.newKey ? this.reads.get(tenant, plan.id) : Promise.resolve(undefined),
    ]).catch((err: unknown) => {
      void this.early.giveBack(early);
      throw err;
    });
    // The same key always answers the same run, whatever this delivery names or carries (C017).
    if (existing) return { outcome: "duplicate", run: existing };
    if (bytes > MAX_INPUT_BYTES) return { outcome: "input_too_large", bytes, limit: MAX_INPUT_BYTES };
    // From here an early admission (if any) is used as this start's, or given back.
    const refuse = async <A extends StartRunResult>(answer: A): Promise<A> => (await this.early.giveBack(early), answer);
    if (resolved.outcome === "definition_not_found") return refuse(resolved);
    if (resolved.outcome === "definition_not_published") return refuse(resolved);
    if (resolved.plan.input_schema) {
      const checked = validateAgainstSchema(resolved.plan.input_schema, input);
      if (!checked.ok) return refuse({ outcome: "invalid_input", reason: checked.errors.map((e) => `${e.path}: ${e.message}`).join("; ") });
    }
    if (!lane.ok) return { outcome: "lane_not_allowed", reason: lane.reason };
    return { ...resolved, lane: lane.lane };
  }

  /**
   * Admission by the tenant actor: kill switch, drain, day cap, day budget, run concurrency. A
   * refusal is audited and answered; an admission that did not answer is a retryable fault.
   */
  private async admitStart(
    tenant: string,
    request: StartRun,
    plan: StartPlan,
    resolved: Resolved,
  ): Promise<Admitted | { outcome: "refused"; answer: StartRunResult }> {
    const { early, project } = plan;
    let { key, id } = plan;
    const ceiling = resolved.plan.limits?.max_cost_cents;
    // A run a person admits first (its definition's `admission` policy) asks its tenant only once approved (machines/execution/admission.ts).
    const held = heldForAdmission(resolved.plan, { parent_run_id: null, replay_of: request.replay_of });
    const reused = this.early.agrees(early, { held, ceiling });
    if (early && !reused) {
      // Admitted on other terms than the latest version's: that id's slot goes back (whenever
      // its answer comes) and the start is admitted again under an id of its own, so a late
      // give-back can never release this one.
      void this.early.giveBack(early);
      key = startKey("api", randomDeliveryId());
      id = runIdFor(tenant, key);
    }
    // The run's live-index entry must precede its record. A run its tenant counts from this
    // admission has one once it answers: its member key (`counted`; actors/run/live-runs.ts). A held run asks
    // its tenant later: its key is added now, beside the rest of the start rather than after it.
    const [admitted, indexed] = await Promise.all([
      reused ? this.early.use(early) : held ? { outcome: "held" as const } : this.deps.tenants.admit(tenant, id, project, ceiling, !request.start_key),
      held && this.deps.live ? this.deps.live.add(id, { tenant, at: this.deps.now() }).then(() => true) : false,
    ]);
    if (
      admitted.outcome === "tenant_killed" ||
      admitted.outcome === "tenant_draining" ||
      admitted.outcome === "day_cap_reached" ||
      admitted.outcome === "budget_exhausted" ||
      admitted.outcome === "queue_full"
    ) {
      await this.auditRefusal(tenant, admitted.outcome, {
        source: plan.source,
        ...(request.initiator ? { initiator: request.initiator } : {}),
        definition: resolved.ref,
        start_key: key,
      });
      return { outcome: "refused", answer: { outcome: admitted.outcome, detail: admitted } };
    }
    // Queued behind the tenant's caps: the run is created `queued` and starts when its tenant gives it a slot.
    if (admitted.outcome !== "admitted" && admitted.outcome !== "queued" && admitted.outcome !== "held")
      throw new RunwayFault("admission_unavailable", `admission of ${id}: ${admitted.outcome}`, { kind: "retryable" });
    // Counted by this very decision: its member key is stored. A duplicate admission may answer for a run that ended.
    const counted = admitted.outcome !== "held" && (admitted as { duplicate?: unknown }).duplicate === false;
    return { outcome: "admitted", key, id, ceiling, queued: admitted.outcome === "queued", counted, indexed };
  }

  /** The run actor creates the run from a seed built of the validated request: `started`, or the run another start with its key made. */
  private async createRun(tenant: string, request: StartRun, plan: StartPlan, resolved: Resolved, admitted: Admitted): Promise<StartRunResult> {
    const { id, key, ceiling } = admitted;
    const { project } = plan;
    const seed = {
      id,
      tenant,
      root_run_id: id,
      parent_run_id: null,
      parent_node: null,
      depth: 0,
      definition: resolved.ref,
      source: plan.source,
      start_key: key,
      lane: resolved.lane,
      ...(admitted.queued ? { admission: "queued" as const } : {}),
      ...(request.project ? { project } : {}),
      ...(request.priority !== undefined ? { priority: request.priority } : {}),
      ...(request.deadline_ms !== undefined ? { deadline: this.deps.now() + request.deadline_ms } : {}),
      ...(request.replay_of ? { replay_of: request.replay_of } : {}),
      ...(ceiling !== undefined ? { cost_ceiling_cents: ceiling } : {}),
      ...(admitted.counted ? { counted: true as const } : {}),
      ...(request.initiator ? { initiator: request.initiator } : {}),
      ...(request.trace ? { trace: request.trace } : {}),
      input: plan.input,
    };
    // The seed is built here from the validated request: applied without parsing it again; a run
    // whose id was made up for this start (no start key) has no record to read first.
    const create = { type: "run.create" as const, run: seed, ...(admitted.indexed ? { live_indexed: true as const } : {}) };
    const answer = await this.runs.of(id).create(create, `create/${id}`, { trusted: true, fresh: !request.start_key || plan.newKey });
    const started = answer.outcome === "applied" ? answer.value : undefined;
    if (started?.outcome === "started") return { outcome: "started", run: started.run };
    if (answer.outcome === "applied" || answer.outcome === "refused" || answer.outcome === "duplicate") {
      // Another start with this key got there first (or this one was stored and is being applied).
      const run = await this.waitForRun(tenant, id);
      return { outcome: "duplicate", run };
    }
    if (answer.outcome === "invalid_input") {
      await this.releaseSlot(tenant, id, project);
      return { outcome: "invalid_input", reason: answer.reason };
    }
    throw new RunwayFault("start_unavailable", `start of ${id} not confirmed: ${answer.outcome}`, { kind: "retryable" });
  }

  /**
   * A start refused at admission leaves one decision on the audit stream (`rw.audit.<tenant>.admission`,
   * C033): no run exists, so its `run_id` is null. Allowed starts write nothing here.
   */
  private async auditRefusal(tenant: string, code: string, about: Record<string, unknown>): Promise<void> {
    const decision = { type: "start_refused", code, tenant, run_id: null, at: this.deps.now(), ...about };
    const stored = await publish(this.deps.nc, `rw.audit.${tenant}.admission`, new TextEncoder().encode(JSON.stringify(decision)), {
      msgId: `refused/${randomDeliveryId()}`,
    });
    if (stored.outcome !== "stored") throw new RunwayFault("audit_unavailable", `audit of a refused start: ${stored.outcome}`, { kind: "retryable" });
  }

  /**
   * The run actor refused the create before storing it, so this start made no run: the slot its
   * tenant gave it comes back now rather than at the sweep's `release_orphan_slot`. Only when no
   * run with this id exists (a start with the same key may have made it; then the slot is its
   * own), and its live-index entry goes with it; if that cannot be read, the sweep does both later.
   */
  private async releaseSlot(tenant: string, id: string, project: string): Promise<void> {
    const run = await this.reads.get(tenant, id).catch(() => null);
    if (run !== undefined) return;
    await this.deps.tenants.runEnded(tenant, id, project).catch(() => undefined);
    await this.deps.live?.remove(id).catch(() => undefined);
  }

  private async waitForRun(tenant: string, id: string): Promise<RunView> {
    const deadline = Date.now() + 10_000;
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      const run = await this.reads.get(tenant, id);
      if (run) return run;
      if (Date.now() > deadline) throw new RunwayFault("start_unavailable", `run ${id} not visible yet`, { kind: "retryable" });
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
