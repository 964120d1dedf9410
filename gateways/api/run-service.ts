import type { NatsConnection } from "@nats-io/transport-node";
import { heldForAdmission, laneFor, validateAgainstSchema, type LaneDecision, type RunLane } from "../../machines/index.js";
import { ID_PATTERN, jsonBytes, parseEventId, publish, readActor, RunwayFault, type ActorHost, type MailboxClient } from "../../runtime/index.js";
import type { AskAnswer } from "./ask.js";
import { RunHandles } from "./run-handles.js";
import {
  compactedView,
  partsHolding,
  randomDeliveryId,
  readRunEvents,
  recordFacts,
  RUN_RECORD,
  RunIndex,
  runIdFor,
  startKey,
  tenantOfRun,
  view,
  type DefinitionStore,
  type ResolveResult,
  type LiveRunIndex,
  type RunEvent,
  type RunSummary,
  type RunView,
} from "../../actors/index.js";
import { EarlyAdmissions, type EarlyAdmission } from "./early-admission.js";
import type { DecideRequest, ListRunsRequest, ReconcileRequest, SignalRequest, StartRunRequest } from "./schemas.js";
import type { TenantService } from "./tenant-service.js";

export const MAX_INPUT_BYTES = 32 * 1024;

/** The API's runs.start request (schemas.ts), or a replay of a run (RunReplays: not offered by the API). */
export type StartRun = StartRunRequest & {
  replay_of?: string;
  /** The authenticated caller who starts it (an API key's identity): recorded as the run's initiator. */
  initiator?: string;
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

/** A page of a run's progress events (see RunService.events). */
export type RunEventsResult =
  | {
      outcome: "events";
      events: RunEvent[];
      /** The id to ask `after` next: the last event's, or the `after` given when none came. */
      last: string | null;
      /** The page stopped at its bound: more events are stored after `last`. */
      more: boolean;
      /** The run's record was compacted after the ended-run retention: its events are gone. */
      compacted?: true;
    }
  | { outcome: "run_not_found" };

/** The answers of `decide`. */
export type DecideResult =
  | { outcome: "decided"; approval: string; decision: "approved" | "edited" | "rejected" }
  | { outcome: "approval_not_found" | "run_not_waiting" | "approval_expired" | "already_decided" }
  /** An edit of an admission approval (approved or rejected only). */
  | { outcome: "invalid_input"; reason: string };

/** The answers of `signal`. */
export type SignalResult =
  | { outcome: "delivered"; nodes: string[] }
  | { outcome: "run_not_waiting" }
  | { outcome: "invalid_input"; reason?: string }
  | { outcome: "run_not_found" }
  | { outcome: "tenant_not_found" };

/** The answers of `reconcile`: settled, or why not. */
export type ReconcileResult =
  | { outcome: "settled"; decision: "done" | "retry" | "abandon"; node: string; item?: number }
  | { outcome: "not_reconciling" }
  | { outcome: "run_not_found" }
  | { outcome: "tenant_not_found" };

/** A run as a cancel left it: its summary and cancel record, from the cancel's own answer (a full view when it had to be read). */
export type CancelView = RunSummary & { cancel: unknown };

export type CancelRunResult =
  | { outcome: "cancelled" | "cancel_requested"; run: CancelView }
  | { outcome: "not_cancellable"; run: RunView }
  | { outcome: "run_not_found" }
  | { outcome: "tenant_not_found" };

/** A start as planned before anything is read (RunService.planStart). */
interface StartPlan {
  key: string;
  id: string;
  input: unknown;
  bytes: number;
  source: string;
  lane: LaneDecision;
  project: string;
  early: EarlyAdmission | undefined;
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

/**
 * The run actor refused a command in its machine's first state: it holds no run. The id names no
 * run, or one whose record was compacted after the ended-run retention (`get` tells which).
 */
function holdsNoRun(answer: AskAnswer): boolean {
  return answer.outcome === "refused" && answer.state === "new";
}

/** An id this tenant's runs could have: the run actor itself answers whether it holds one. */
function mayBeRunOf(tenant: string, id: string): boolean {
  return ID_PATTERN.test(id) && tenantOfRun(id) === tenant;
}

/**
 * Starting, reading and cancelling runs: what the API and the CLI call. Reads go to the run's
 * partition bucket; writes are commands to the run actor, answered after they are stored.
 */
export class RunService {
  private readonly index: RunIndex;
  /** Typed handles on runs: each command's answer as the run actor declares it. */
  readonly runs: RunHandles;
  /** Starts admitted on the version this node last resolved, while the latest is read (early-admission.ts). */
  readonly early: EarlyAdmissions;

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      partitions: number;
      mailbox: MailboxClient;
      host?: ActorHost;
      definitions: DefinitionStore;
      tenants: TenantService;
      /** The live-run index, added to beside the admission (without it, the run actor adds the entry itself). */
      live?: LiveRunIndex;
      now(): number;
    },
  ) {
    this.index = new RunIndex(deps.nc, deps.partitions);
    this.runs = new RunHandles(deps);
    this.early = new EarlyAdmissions(deps);
  }

  /**
   * Starts a run: the start is planned (key, id, lane, an early admission), its definition and
   * any run its start key made are read, its tenant admits it, and the run actor creates it.
   */
  async start(tenant: string, request: StartRun): Promise<StartRunResult> {
    if (!(await this.deps.tenants.exists(tenant))) return { outcome: "tenant_not_found" };
    const plan = this.planStart(tenant, request);
    const checked = await this.checkStart(tenant, request, plan);
    if (checked.outcome !== "found") return checked;
    const admitted = await this.admitStart(tenant, request, plan, checked);
    if (admitted.outcome === "refused") return admitted.answer;
    return this.createRun(tenant, request, plan, checked, admitted);
  }

  /** What a start is decided on before anything is read; an early admission is asked at once when the start may use one. */
  private planStart(tenant: string, request: StartRun): StartPlan {
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
    return { key, id, input, bytes, source, lane, project, early };
  }

  /**
   * The definition and a run this start key already made, read side by side, and the refusals
   * that need no admission. An early admission is given back with any refusal.
   */
  private async checkStart(tenant: string, request: StartRun, plan: StartPlan): Promise<Resolved | Exclude<StartRunResult, { outcome: "started" }>> {
    const { early, input, bytes, lane } = plan;
    const [resolved, existing] = await Promise.all([
      this.deps.definitions.resolve(tenant, request.definition, request.version),
      request.start_key ? this.get(tenant, plan.id) : Promise.resolve(undefined),
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
      input: plan.input,
    };
    // The seed is built here from the validated request: applied without parsing it again; a run
    // whose id was made up for this start (no start key) has no record to read first.
    const create = { type: "run.create" as const, run: seed, ...(admitted.indexed ? { live_indexed: true as const } : {}) };
    const answer = await this.runs.of(id).create(create, `create/${id}`, { trusted: true, fresh: !request.start_key });
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
    const run = await this.get(tenant, id).catch(() => null);
    if (run !== undefined) return;
    await this.deps.tenants.runEnded(tenant, id, project).catch(() => undefined);
    await this.deps.live?.remove(id).catch(() => undefined);
  }

  private async waitForRun(tenant: string, id: string): Promise<RunView> {
    const deadline = Date.now() + 10_000;
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      const run = await this.get(tenant, id);
      if (run) return run;
      if (Date.now() > deadline) throw new RunwayFault("start_unavailable", `run ${id} not visible yet`, { kind: "retryable" });
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /**
   * A run as its record says; once the record was compacted (the ended-run retention), its final
   * summary from the runs index (`compacted: true`: no input, nodes or result).
   */
  async get(tenant: string, id: string): Promise<RunView | undefined> {
    return (await this.read(tenant, id))?.view;
  }

  /** {@link get}, and whether the run's tenant counted it from its start (which part of the runs index lists it). */
  private async read(tenant: string, id: string): Promise<{ view: RunView; counted: boolean } | undefined> {
    if (tenantOfRun(id) !== tenant) return undefined;
    // The head, and the journal's first entry (the input), side by side.
    const [read, first] = await Promise.all([readActor(this.deps, RUN_RECORD, id), readActor(this.deps, RUN_RECORD, id, "first")]);
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
    if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `run ${id}: ${read.detail}`);
    if (read.outcome === "missing") {
      const summary = await this.index.summary(tenant, id);
      return summary ? { view: compactedView(summary), counted: summary.counted === true } : undefined;
    }
    const run = read.snapshot.context?.run;
    if (!run) return undefined;
    const input = first.outcome === "found" ? recordFacts(first.record).find((f) => f.t === "input")?.value : undefined;
    return { view: view(run, input ?? {}), counted: run.counted === true };
  }

  /**
   * A page of a tenant's runs from the runs index (actors/run/runs-index.ts): first those its tenant did not
   * count at their start (children, runs a person admits first) in the order they were created,
   * then those it counts, live ones in the order it admitted or queued them, then ended ones in
   * the order they ended. `limit` (default 50, at most 500) index entries read from `cursor` on
   * (a page costs its own size, whatever the tenant stored), each shown as `get` shows it; with
   * `status`, those of them in that status (a page may then hold fewer than `limit`), from the
   * parts that can hold it: a live status skips the ended runs, an ended one the live runs.
   * `next_cursor` goes on after this page; null when the index has nothing more. A run that ends
   * while the pages are read may be listed twice, once live and once ended.
   */
  async list(tenant: string, options: ListRunsRequest = {}): Promise<{ runs: RunView[]; next_cursor: string | null }> {
    const limit = Math.min(options.limit ?? 50, 500);
    const page = await this.index.page(tenant, options.cursor, limit, partsHolding(options.status));
    const read = await Promise.all(page.entries.map(async (e) => ({ part: e.part, run: await this.read(tenant, e.run) })));
    const runs = read
      // Each run in one part: a run a person admitted first is counted later (its `.c` entry lists
      // it, not its member key or its end); a counted run stored before had a `.c` entry too.
      .filter((r) => r.run !== undefined && (r.part === "c") === !r.run.counted)
      .map((r) => r.run!.view)
      .filter((r) => !options.status || r.status === options.status);
    return { runs, next_cursor: page.next };
  }

  /**
   * A page of a run's progress events after the event `after` (an id as published; none: from
   * its first), read back from the run's journal (see readRunEvents): what a watcher that
   * missed some of them live reads to catch up, with the same ids. At most `limit` (default
   * 500) events and about 256 KiB.
   */
  async events(tenant: string, id: string, options: { after?: string; limit?: number } = {}): Promise<RunEventsResult> {
    if (tenantOfRun(id) !== tenant) return { outcome: "run_not_found" };
    const after = options.after === undefined ? undefined : parseEventId(options.after);
    if (options.after !== undefined && !after) throw new RunwayFault("invalid_event_id", `not an event id: ${options.after}`);
    const read = await readRunEvents(this.deps.nc, this.deps.partitions, id, { ...(after ? { after } : {}), limit: options.limit ?? 500 });
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
    if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `run ${id}: ${read.detail}`);
    if (read.empty) {
      // Nothing stored from `after` on: a run that is not there, or whose record was compacted.
      const run = await this.get(tenant, id);
      if (!run) return { outcome: "run_not_found" };
      if (run.compacted) return { outcome: "events", events: [], last: read.last, more: false, compacted: true };
    }
    return { outcome: "events", events: read.events, last: read.last, more: read.more };
  }

  /** Delivers a named signal to the run's `wait` nodes: `delivered` (with the nodes it woke), `run_not_waiting`, or `invalid_input` (the data does not fit a node's schema; nothing written). */
  async signal(tenant: string, id: string, signal: Omit<SignalRequest, "run_id">): Promise<SignalResult> {
    if (!(await this.deps.tenants.exists(tenant))) return { outcome: "tenant_not_found" };
    if (!mayBeRunOf(tenant, id)) return { outcome: "run_not_found" };
    const answer = await this.runs.of(id).signal(signal, `signal/${id}/${randomDeliveryId()}`);
    if (answer.outcome === "applied") return answer.value ?? { outcome: "run_not_waiting" };
    if (answer.outcome === "refused") return (await this.unknown(tenant, id, answer)) ? { outcome: "run_not_found" } : { outcome: "run_not_waiting" };
    if (answer.outcome === "invalid_input") return { outcome: "invalid_input", reason: answer.reason };
    throw new RunwayFault("signal_unavailable", `signal ${signal.name} to ${id} not confirmed: ${answer.outcome}`, { kind: "retryable" });
  }

  /** A person decides an approval (`<run>:<node>`): `decided`, or `approval_not_found`, `run_not_waiting`, `approval_expired`, `already_decided`. */
  async decide(tenant: string, approval: string, decision: Omit<DecideRequest, "id">): Promise<DecideResult> {
    const cut = approval.indexOf(":");
    const id = cut > 0 ? approval.slice(0, cut) : "";
    const node = approval.slice(cut + 1);
    if (!id || !node || !mayBeRunOf(tenant, id)) return { outcome: "approval_not_found" };
    const answer = await this.runs.of(id).decide({ node, ...decision }, `decide/${approval}/${randomDeliveryId()}`);
    if (answer.outcome === "applied") return answer.value ?? { outcome: "run_not_waiting" };
    if (answer.outcome === "refused") return (await this.unknown(tenant, id, answer)) ? { outcome: "approval_not_found" } : { outcome: "run_not_waiting" };
    throw new RunwayFault("decide_unavailable", `decision on ${approval} not confirmed: ${answer.outcome}`, { kind: "retryable" });
  }

  /** A person settles a step held on an intent whose outcome is unknown (see `machines/execution/intents.ts`). */
  async reconcile(tenant: string, id: string, settle: Omit<ReconcileRequest, "run_id">): Promise<ReconcileResult> {
    if (!(await this.deps.tenants.exists(tenant))) return { outcome: "tenant_not_found" };
    if (!mayBeRunOf(tenant, id)) return { outcome: "run_not_found" };
    const answer = await this.runs.of(id).settle(settle, `settle/${id}/${randomDeliveryId()}`);
    if (answer.outcome === "applied") return answer.value?.outcome === "settled" ? answer.value : { outcome: "not_reconciling" };
    if (answer.outcome === "refused") return (await this.unknown(tenant, id, answer)) ? { outcome: "run_not_found" } : { outcome: "not_reconciling" };
    throw new RunwayFault("reconcile_unavailable", `settling ${settle.key} of ${id} not confirmed: ${answer.outcome}`, { kind: "retryable" });
  }

  /**
   * Cancels a run. The run actor answers whether it holds the run, and an applied cancel answers
   * with the run as its write left it (summary and cancel record): nothing is read before or after.
   * A refusal (an ended run: `not_cancellable`) reads the run to show it.
   */
  async cancel(tenant: string, id: string, reason: string, by: string): Promise<CancelRunResult> {
    if (!(await this.deps.tenants.exists(tenant))) return { outcome: "tenant_not_found" };
    if (!mayBeRunOf(tenant, id)) return { outcome: "run_not_found" };
    const answer = await this.runs.of(id).cancel(reason, by, `cancel/${id}/${randomDeliveryId()}`);
    // Requested: calls it let finish are still in flight; the run is cancelled once they are settled.
    if (answer.outcome === "applied") {
      const value = answer.value;
      const outcome = value?.outcome === "cancel_requested" ? "cancel_requested" : "cancelled";
      // A node of an earlier version answers without the run: read it then.
      const run = value?.run ?? (await this.get(tenant, id));
      if (run) return { outcome, run };
      throw new RunwayFault("cancel_unavailable", `cancel of ${id} applied but the run is not readable`, { kind: "retryable" });
    }
    if (answer.outcome === "refused") {
      const run = await this.get(tenant, id);
      return run ? { outcome: "not_cancellable", run } : { outcome: "run_not_found" };
    }
    throw new RunwayFault("cancel_unavailable", `cancel of ${id} not confirmed: ${answer.outcome}`, { kind: "retryable" });
  }

  /** A refused command met no run: none was ever created, or its record was compacted (`get` reads its summary: it existed). */
  private async unknown(tenant: string, id: string, answer: AskAnswer): Promise<boolean> {
    return holdsNoRun(answer) && !(await this.get(tenant, id));
  }
}
