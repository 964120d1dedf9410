import type { AnyMachineSnapshot, EventObject } from "xstate";
import {
  executionMachine,
  RunCommandSchema,
  TERMINAL,
  type RunStatus,
  type ExecutionContext,
  type ParentView,
  type RunFact,
  type SweepSettings,
  type AliveAttempt,
  type ChildStartCode,
} from "../../machines/index.js";
import type { NatsConnection } from "@nats-io/transport-node";
import { defineActor, isFault, jsonBytes, readActor, RunwayFault, type ActorAddress, type Effect, type RecordFormat } from "../../runtime/index.js";
import type { LiveRunIndex } from "./live-runs.js";
import { runCreatedEffect, runEndedEffect } from "./runs-index.js";
import { reconcileIndexEffects } from "./reconciliations.js";
import { inboxEffects } from "./approvals.js";
import { childStartKey, runIdFor, MIGRATIONS, RECORD_VERSIONS } from "../records/index.js";
import type { CompiledPlan, DefinitionRef } from "../definitions/index.js";
import { TENANT_RECORD } from "../tenant/index.js";
import type { RunMemories } from "./memory.js";
import type { RunTypes } from "./protocol.js";
import { runSpanObserver, type SpanSink } from "./spans.js";

export const RUN_KIND = "run";

/**
 * The run record's format: version 3, the machine's states are the run's statuses (2: `new`/
 * `live`/`ended`); version 2 made the head bounded, with a journal (1 held its input and outputs
 * itself). Older records are brought forward by the steps of `MIGRATIONS.run`.
 */
export const RUN_RECORD: RecordFormat<RunTypes> = { kind: RUN_KIND, version: RECORD_VERSIONS.run, migrations: MIGRATIONS.run };

/**
 * The run actor: the execution machine bound to the actor host. `prepare` hands the machine
 * what a run's head does not hold — the immutable plan of the version it pinned (cached by
 * digest), the ids its subworkflow nodes' children will have, and its input and outputs (its
 * journal's facts, `RunMemories`) — so the stored head stays small and the machine stays pure.
 * A run keeps every stored transition (`history: "journal"`): that history is its journal.
 */
export function runActor(deps: RunActorDeps, settings: RunActorSettings = {}) {
  // What every prepared event carries from the node's settings, made once.
  const tuned = {
    ...(settings.leaseTtlMs ? { lease_ttl_ms: settings.leaseTtlMs } : {}),
    ...(settings.waitGraceMs !== undefined ? { wait_grace_ms: settings.waitGraceMs } : {}),
    ...(settings.expansionAdmission ? { expansion_admission: true } : {}),
    ...(settings.sweep ? { sweep: settings.sweep } : {}),
  };
  return defineActor<typeof executionMachine, RunTypes>({
    machine: executionMachine,
    events: RunCommandSchema,
    history: "journal",
    ...RUN_RECORD,
    onJournal: (address, facts) => deps.memories.stored(address.id, facts),
    // An ended run is rarely addressed again (a duplicate start, a late report): it leaves this
    // node's memory once its last write is out, its journal's facts with it, so a node holds what
    // its live runs need, not every run it has served (a later command reads both back).
    keepInMemory: (snapshot) => !isEnded(snapshot.value),
    onDropped: (address) => deps.memories.forget(address.id),
    // A recovery judges which offered attempts this process still holds: the offers of the commands
    // decided before it must have reached the scheduler, or it would count them lost and run them twice.
    readsHandOvers: (event) => event.type === "run.recover",
    effects: indexEffects(settings.live),
    // Tracing on: the spans a stored transition ends (spans.ts). Off: no observer, nothing kept per transition.
    ...(settings.spans ? { observe: runSpanObserver(settings.spans) } : {}),
    prepare: preparer(deps, settings.live, tuned),
  });
}

interface RunActorDeps {
  planOf(digest: string): Promise<CompiledPlan>;
  parentOf(parentId: string, childId: string): Promise<ParentView | null>;
  memories: Pick<RunMemories, "of" | "stored" | "forget">;
  /** The attempts of `run` this process holds now (queued for a worker, granted or executing): what a recovery must not count lost. */
  alive?(run: string): AliveAttempt[];
  /**
   * A child's start gate: its tenant's policy as the child's create reads it (absent: every child
   * may start). A store that did not answer throws a retryable fault: nothing is decided, and the
   * create is tried again (`readTenantGate`).
   */
  tenantGate?(tenant: string): Promise<TenantGate>;
}

/** What a child's start gate read of its tenant: it may start, the kill switch is on, or the record did not decode. */
export type TenantGate = { outcome: "open" } | { outcome: "tenant_killed" | "policy_unavailable"; detail: string };

interface RunActorSettings {
  leaseTtlMs?: number;
  waitGraceMs?: number;
  expansionAdmission?: boolean;
  sweep?: SweepSettings;
  /** The live-run index (made on first use: the actor is defined before the connection exists). */
  live?: () => LiveRunIndex;
  /** Where the run's spans go when tracing is on (absent: off). */
  spans?: SpanSink;
}

/** The live index, the runs index and the reconciliation items follow the run's own transitions (live-runs.ts, runs-index.ts, reconciliations.ts). */
function indexEffects(live: (() => LiveRunIndex) | undefined) {
  return (_address: ActorAddress, before: AnyMachineSnapshot, after: AnyMachineSnapshot): Effect[] => {
    const was = (before.context as ExecutionContext).run;
    const run = (after.context as ExecutionContext).run;
    if (!run) return [];
    const out: Effect[] = [...reconcileIndexEffects(was, run), ...inboxEffects(was, run)];
    // A run its tenant counts is listed by its member key while it lives (runs-index.ts).
    if (!was && !run.counted) out.push(runCreatedEffect(run));
    if (!isEnded(before.value) && isEnded(after.value)) {
      out.push(runEndedEffect(run));
      if (live && !run.counted) out.push(live().removal(run.id));
    }
    return out;
  };
}

/** The run actor's `prepare`: what the machine needs that the head does not hold (see {@link runActor}). */
function preparer(deps: RunActorDeps, live: (() => LiveRunIndex) | undefined, tuned: object) {
  return async (event: EventObject, current: AnyMachineSnapshot | undefined, pending: readonly unknown[]) => {
    const e = event as EventObject & { run?: { id: string; tenant: string; parent_run_id?: string | null; definition: PinnedRef; counted?: true } };
    const stored = (current?.context as ExecutionContext | undefined)?.run ?? undefined;
    const creating = e.type === "run.create" && stored == null;
    const run = e.type === "run.create" ? e.run : stored;
    // No run yet and not a create: the machine refuses it; no plan is needed for that.
    if (!run) return event;
    // In the live index before the record exists, so recovery never misses a live run: a run
    // its tenant counts is there by its member key already; an in-process start of a run a
    // person admits first added its key beside the rest of the start (`live_indexed`: set only
    // on a command dispatched here unparsed; the mailbox's schema strips it).
    const indexed = (e as { live_indexed?: unknown }).live_indexed === true || (e.type === "run.create" && e.run?.counted === true);
    if (creating && live && !indexed) await live().add(run.id, { tenant: run.tenant, at: (e as { now?: number }).now ?? 0 });
    // A child's create reads its parent once: the machine refuses a child of a cancelled or ended parent before it exists.
    const child = creating && run.parent_run_id ? await childStart(deps, run, run.parent_run_id) : undefined;
    // An ended run only answers (late reports, signals, decisions): it reads no input or
    // output, so a command to one that has left memory does not read its journal back.
    const ended = stored != null && isEnded(current?.value);
    const needsMemory = stored != null && !ended;
    const [compiled, memory] = await Promise.all([
      child?.compiled ?? (ended ? readPinned(deps, run.definition).then((read) => read.compiled) : deps.planOf(run.definition.digest)),
      needsMemory ? deps.memories.of(stored, pending as RunFact[]) : undefined,
    ]);
    return {
      ...event,
      ...(child ? { parent: child.parent, ...(child.refused ? { refused: child.refused } : {}) } : {}),
      ...(memory ? { memory } : {}),
      // Read now, as it is decided, not when it was sent: a run that moved meanwhile offered attempts since.
      ...(e.type === "run.recover" ? { alive: deps.alive?.(run.id) ?? [] } : {}),
      plan: compiled.plan,
      child_ids: childIdsOf(run, compiled),
      // A subagent's child is named by the call's effect key: the same call starts the same child.
      ...(e.type === "effect.child" ? { subagent_child_id: runIdFor(run.tenant, `${run.id}:${(e as { key?: string }).key ?? ""}`) } : {}),
      child_definitions: compiled.children,
      ...tuned,
      ...measuredOutput(event),
    };
  };
}

/** A child's create as its start gate read it: its parent, its pinned plan, and the gate's refusal if any (C047, C048). */
interface ChildStart {
  parent: ParentView | null;
  compiled: CompiledPlan;
  refused?: { code: ChildStartCode; message: string };
}

/**
 * A child's start gate, read before its create is decided: its parent (the machine refuses a
 * child of a cancelled or ended parent), its pinned plan and its tenant's policy. A plan this
 * deployment cannot read or parse is `snapshot_unbuildable`; a tenant record that does not decode,
 * `policy_unavailable`; a killed tenant, `tenant_killed`: the machine creates such a child already
 * failed under that code, and its parent's node reads it (never an exception, which would leave
 * the parent waiting on a child that never exists). A store that did not answer still throws,
 * retryable: nothing was decided.
 */
async function childStart(deps: RunActorDeps, run: { id: string; tenant: string; definition: PinnedRef }, parentId: string): Promise<ChildStart> {
  const [parent, pinned, policy] = await Promise.all([
    deps.parentOf(parentId, run.id),
    readPinned(deps, run.definition),
    deps.tenantGate?.(run.tenant) ?? OPEN,
  ]);
  if (pinned.unbuildable !== undefined) return { parent, compiled: pinned.compiled, refused: { code: "snapshot_unbuildable", message: pinned.unbuildable } };
  if (policy.outcome !== "open") return { parent, compiled: pinned.compiled, refused: { code: policy.outcome, message: policy.detail } };
  return { parent, compiled: pinned.compiled };
}

/** A run's pinned definition as its record names it (a stored record's may lack its name). */
type PinnedRef = Pick<DefinitionRef, "digest"> & Partial<DefinitionRef>;

const OPEN: Promise<TenantGate> = Promise.resolve({ outcome: "open" });

/**
 * A pinned plan, or, when this deployment cannot read or parse it (anything but a retryable
 * fault), an empty plan in its place and why: what a run that ended (or ends now) without its
 * plan is decided on, since it runs nothing.
 */
async function readPinned(deps: RunActorDeps, ref: PinnedRef): Promise<{ compiled: CompiledPlan; unbuildable?: string }> {
  try {
    return { compiled: await deps.planOf(ref.digest) };
  } catch (err) {
    if (isFault(err) && err.kind === "retryable") throw err;
    const why = isFault(err) ? `${err.code}: ${err.message}` : String(err);
    return { compiled: unbuildablePlan(ref), unbuildable: `the pinned definition ${ref.name} v${ref.version} (${ref.digest}) cannot be read: ${why}` };
  }
}

function unbuildablePlan(ref: PinnedRef): CompiledPlan {
  return { plan: { plan_version: 1, name: ref.name ?? ref.digest, nodes: [], definition_digest_input: "" }, children: {} };
}

/**
 * A child's start gate on a real store: its tenant's record, read once. A killed tenant refuses
 * (`tenant_killed`); a record that does not decode cannot be decided on (`policy_unavailable`);
 * a missing record has no policy to apply (open); a store that did not answer throws, retryable.
 */
export async function readTenantGate(nc: NatsConnection, partitions: number, tenant: string): Promise<TenantGate> {
  const read = await readActor({ nc, partitions }, TENANT_RECORD, tenant);
  if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
  if (read.outcome === "corrupt") return { outcome: "policy_unavailable", detail: `tenant ${tenant}'s record does not decode: ${read.detail}` };
  if (read.outcome === "found" && read.snapshot.value === "killed") return { outcome: "tenant_killed", detail: `tenant ${tenant}'s kill switch is on` };
  return { outcome: "open" };
}

/**
 * A map item's successful output, measured here once without building its JSON: the machine caps
 * a map's combined output by these sizes (`Prepared.output_bytes`) instead of serialising each.
 */
export function measuredOutput(event: EventObject): { output_bytes?: number } {
  const e = event as EventObject & { item?: number; outcome?: string; output?: unknown };
  return e.type === "step.result" && e.item !== undefined && e.outcome === "succeeded" ? { output_bytes: jsonBytes(e.output ?? null) } : {};
}

function childIdsOf(run: { id: string; tenant: string }, compiled: CompiledPlan): Record<string, string> {
  const ids: Record<string, string> = {};
  for (const node of compiled.plan.nodes) if (node.kind === "subworkflow") ids[node.id] = runIdFor(run.tenant, childStartKey(run.id, node.id));
  return ids;
}

/** A run machine state (a stored snapshot's value) that is terminal. */
export function isEnded(value: unknown): boolean {
  return typeof value === "string" && TERMINAL.has(value as RunStatus);
}

/**
 * A child's parent as its create sees it: one read of the parent's stored record (the parent's
 * write that made this child is stored before the create is sent, so it is visible).
 */
export async function readParent(nc: NatsConnection, partitions: number, parentId: string, childId: string): Promise<ParentView | null> {
  const read = await readActor({ nc, partitions }, RUN_RECORD, parentId);
  if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
  if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `parent run ${parentId}: ${read.detail}`);
  const parent = read.outcome === "found" ? read.snapshot.context?.run : null;
  if (!parent) return null;
  const node = Object.values(parent.nodes).find((n) => n.child === childId);
  return { status: parent.lifecycle.status, tenant: parent.tenant, root_run_id: parent.root_run_id, depth: parent.depth, waits: node?.s === "active" };
}
