import type { AnyMachineSnapshot, EventObject } from "xstate";
import { DEFAULT_ENDED_RETENTION_MS, executionMachine, RunCommandSchema, type ExecutionContext, type ParentView } from "../machines/index.js";
import type { NatsConnection } from "@nats-io/transport-node";
import { defineActor, RunwayFault, type ActorAddress, type Effect } from "../runtime/index.js";
import type { LiveRunIndex } from "./live-runs.js";
import { runCreatedEffect, runEndedEffect } from "./run-index.js";
import { readSnapshot } from "./records.js";
import type { CompiledPlan } from "./definitions.js";
import { childStartKey, runIdFor } from "./ids.js";

export const RUN_KIND = "run";

/**
 * The run actor: the execution machine bound to the actor host. `prepare` hands the machine
 * what a run does not store — the immutable plan of the version it pinned (cached by digest)
 * and the ids its subworkflow nodes' children will have — so the stored record stays small
 * and the machine stays pure.
 */
export function runActor(
  plans: { planOf(digest: string): Promise<CompiledPlan>; parentOf(parentId: string, childId: string): Promise<ParentView | null> },
  settings: {
    leaseTtlMs?: number;
    scheduled?: boolean;
    waitGraceMs?: number;
    expansionAdmission?: boolean;
    /** The live-run index (made on first use: the actor is defined before the connection exists). */
    live?: () => LiveRunIndex;
    /** How long an ended run's record is kept before only its final summary is left (default 7 days). */
    endedRunRetentionMs?: number;
  } = {},
) {
  const retention = settings.endedRunRetentionMs ?? DEFAULT_ENDED_RETENTION_MS;
  return defineActor({
    kind: RUN_KIND,
    machine: executionMachine,
    events: RunCommandSchema,
    // The live index and the runs index follow the run's own transitions (see live-runs.ts, run-index.ts).
    effects: (_address: ActorAddress, before: AnyMachineSnapshot, after: AnyMachineSnapshot): Effect[] => {
      const was = (before.context as ExecutionContext).run;
      const run = (after.context as ExecutionContext).run;
      if (!run) return [];
      const out: Effect[] = [];
      if (!was) out.push(runCreatedEffect(run));
      if (before.value !== "ended" && after.value === "ended") {
        out.push(runEndedEffect(run));
        if (settings.live) out.push(settings.live().removal(run.id));
      }
      return out;
    },
    // An ended run's record is compacted after the retention: its final summary stays in the runs index.
    ttl: (snapshot: AnyMachineSnapshot) => (snapshot.value === "ended" ? retention : undefined),
    prepare: async (event: EventObject, current: AnyMachineSnapshot | undefined) => {
      const e = event as EventObject & { now?: number; run?: { id: string; tenant: string; parent_run_id?: string | null; definition: { digest: string } } };
      const creating = e.type === "run.create" && (current?.context as ExecutionContext | undefined)?.run == null;
      const run = e.type === "run.create" ? e.run : ((current?.context as ExecutionContext | undefined)?.run ?? undefined);
      // No run yet and not a create: the machine refuses it; no plan is needed for that.
      if (!run) return event;
      // In the live index before the record exists, so recovery never misses a live run.
      if (creating && settings.live) await settings.live().add(run.id, { tenant: run.tenant, at: e.now ?? 0 });
      // A child's create reads its parent once: the machine refuses a child of a cancelled or ended parent before it exists.
      const parent = creating && run.parent_run_id ? { parent: await plans.parentOf(run.parent_run_id, run.id) } : {};
      const compiled = await plans.planOf(run.definition.digest);
      const child_ids: Record<string, string> = {};
      for (const node of compiled.plan.nodes) {
        if (node.kind === "subworkflow") child_ids[node.id] = runIdFor(run.tenant, childStartKey(run.id, node.id));
      }
      return {
        ...event,
        ...parent,
        plan: compiled.plan,
        child_ids,
        child_definitions: compiled.children,
        ...(settings.leaseTtlMs ? { lease_ttl_ms: settings.leaseTtlMs } : {}),
        ...(settings.scheduled ? { scheduled: true } : {}),
        ...(settings.waitGraceMs !== undefined ? { wait_grace_ms: settings.waitGraceMs } : {}),
        ...(settings.expansionAdmission ? { expansion_admission: true } : {}),
      };
    },
  });
}

/**
 * A child's parent as its create sees it: one read of the parent's stored record (the parent's
 * write that made this child is stored before the create is sent, so it is visible).
 */
export async function readParent(nc: NatsConnection, partitions: number, parentId: string, childId: string): Promise<ParentView | null> {
  const read = await readSnapshot<ExecutionContext>(nc, partitions, RUN_KIND, parentId);
  if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
  if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `parent run ${parentId}: ${read.detail}`);
  const parent = read.outcome === "found" ? read.snapshot.context?.run : null;
  if (!parent) return null;
  const node = Object.values(parent.nodes).find((n) => n.child === childId);
  return { status: parent.lifecycle.status, tenant: parent.tenant, root_run_id: parent.root_run_id, depth: parent.depth, waits: node?.s === "active" };
}
