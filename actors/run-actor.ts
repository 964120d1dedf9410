import type { AnyMachineSnapshot, EventObject } from "xstate";
import { executionMachine, RunCommandSchema, type ExecutionContext, type ParentView } from "../machines/index.js";
import type { NatsConnection } from "@nats-io/transport-node";
import { defineActor, RunwayFault } from "../runtime/index.js";
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
  settings: { leaseTtlMs?: number; scheduled?: boolean; waitGraceMs?: number; expansionAdmission?: boolean } = {},
) {
  return defineActor({
    kind: RUN_KIND,
    machine: executionMachine,
    events: RunCommandSchema,
    prepare: async (event: EventObject, current: AnyMachineSnapshot | undefined) => {
      const e = event as EventObject & { run?: { id: string; tenant: string; parent_run_id?: string | null; definition: { digest: string } } };
      const creating = e.type === "run.create" && (current?.context as ExecutionContext | undefined)?.run == null;
      const run = e.type === "run.create" ? e.run : ((current?.context as ExecutionContext | undefined)?.run ?? undefined);
      // No run yet and not a create: the machine refuses it; no plan is needed for that.
      if (!run) return event;
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
