import type { AnyMachineSnapshot, EventObject } from "xstate";
import { executionMachine, RunCommandSchema, type ExecutionContext } from "../machines/index.js";
import { defineActor } from "../runtime/index.js";
import type { CompiledPlan } from "./definitions.js";
import { childStartKey, runIdFor } from "./ids.js";

export const RUN_KIND = "run";

/**
 * The run actor: the execution machine bound to the actor host. `prepare` hands the machine
 * what a run does not store — the immutable plan of the version it pinned (cached by digest)
 * and the ids its subworkflow nodes' children will have — so the stored record stays small
 * and the machine stays pure.
 */
export function runActor(plans: { planOf(digest: string): Promise<CompiledPlan> }, settings: { leaseTtlMs?: number; scheduled?: boolean; waitGraceMs?: number; expansionAdmission?: boolean } = {}) {
  return defineActor({
    kind: RUN_KIND,
    machine: executionMachine,
    events: RunCommandSchema,
    prepare: async (event: EventObject, current: AnyMachineSnapshot | undefined) => {
      const e = event as EventObject & { run?: { id: string; tenant: string; definition: { digest: string } } };
      const run = e.type === "run.create" ? e.run : (current?.context as ExecutionContext | undefined)?.run ?? undefined;
      // No run yet and not a create: the machine refuses it; no plan is needed for that.
      if (!run) return event;
      const compiled = await plans.planOf(run.definition.digest);
      const child_ids: Record<string, string> = {};
      for (const node of compiled.plan.nodes) {
        if (node.kind === "subworkflow") child_ids[node.id] = runIdFor(run.tenant, childStartKey(run.id, node.id));
      }
      return { ...event, plan: compiled.plan, child_ids, child_definitions: compiled.children, ...(settings.leaseTtlMs ? { lease_ttl_ms: settings.leaseTtlMs } : {}), ...(settings.scheduled ? { scheduled: true } : {}), ...(settings.waitGraceMs !== undefined ? { wait_grace_ms: settings.waitGraceMs } : {}), ...(settings.expansionAdmission ? { expansion_admission: true } : {}) };
    },
  });
}
