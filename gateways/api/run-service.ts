import type { AskAnswer } from "./ask.js";
import { ID_PATTERN, RunwayFault } from "../../runtime/index.js";
import { randomDeliveryId, tenantOfRun, type RunSummary, type RunView } from "../../actors/index.js";
import { RunHandles } from "./run-handles.js";
import { EarlyAdmissions } from "./early-admission.js";
import { RunReads, type RunEventsResult } from "./run-reads.js";
import { RunStarts, type RunStartDeps, type StartOptions, type StartRun, type StartRunResult } from "./run-start.js";
import type { DecideRequest, ListRunsRequest, ReconcileRequest, SignalRequest } from "./schemas.js";

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
 * Starting, reading and steering runs: what the API and the CLI call. Starts are run-start.ts's,
 * reads run-reads.ts's; the commands here go to the run actor and are answered once stored.
 */
export class RunService {
  /** Typed handles on runs: each command's answer as the run actor declares it. */
  readonly runs: RunHandles;
  /** Starts admitted on the version this node last resolved, while the latest is read (early-admission.ts). */
  readonly early: EarlyAdmissions;
  private readonly reads: RunReads;
  private readonly starts: RunStarts;

  constructor(private readonly deps: RunStartDeps) {
    this.runs = new RunHandles(deps);
    this.early = new EarlyAdmissions(deps);
    this.reads = new RunReads(deps);
    this.starts = new RunStarts(deps, this.reads, this.runs, this.early);
  }

  /** Starts a run (run-start.ts): `started`, the run its start key made, or a closed refusal. */
  start(tenant: string, request: StartRun, options: StartOptions = {}): Promise<StartRunResult> {
    return this.starts.start(tenant, request, options);
  }

  /** A run as its record says, or its summary once compacted (run-reads.ts). */
  get(tenant: string, id: string): Promise<RunView | undefined> {
    return this.reads.get(tenant, id);
  }

  /** A page of a tenant's runs (run-reads.ts). */
  list(tenant: string, options: ListRunsRequest = {}): Promise<{ runs: RunView[]; next_cursor: string | null }> {
    return this.reads.list(tenant, options);
  }

  /** A page of a run's stored progress events (run-reads.ts). */
  events(tenant: string, id: string, options: { after?: string; limit?: number } = {}): Promise<RunEventsResult> {
    return this.reads.events(tenant, id, options);
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
