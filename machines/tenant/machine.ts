import { enqueueActions, setup } from "xstate";
import { applyTenantCommand, newTenant, type TenantContext } from "./decide.js";
import { TENANT_STATES, type TenantEffect, type TenantEvent, type TenantInput, type TenantState } from "./events.js";
import { TENANT_TRANSITIONS } from "./table.js";

type Move = { target: TenantState; guard: { type: "movesTo"; params: { to: TenantState } }; actions: "apply" };
type Stay = { actions: "apply" };
type StateConfig = { on: Record<string, Stay | [Move, Stay]> };

/**
 * The state nodes, generated from {@link TENANT_TRANSITIONS}. A command that keeps the state is
 * one unguarded transition; a command that moves is guarded by where the decision actually
 * goes (so an invalid `tenant.create` stays `new`) with an unguarded fallback that still answers.
 * The machine's state therefore always equals `context.state`.
 */
function statesFromTable(): Record<TenantState, StateConfig> {
  const states = {} as Record<TenantState, StateConfig>;
  for (const state of TENANT_STATES) {
    const on: StateConfig["on"] = {};
    for (const [command, to] of Object.entries(TENANT_TRANSITIONS[state])) {
      on[command] = to === state ? { actions: "apply" } : [{ target: to, guard: { type: "movesTo", params: { to } }, actions: "apply" }, { actions: "apply" }];
    }
    states[state] = { on };
  }
  return states;
}

/**
 * XState merges an assignment into the context: a key the next context no longer has (the
 * members a migrated record held, `legacy` once moved out) is assigned undefined to drop it.
 */
function replacing(before: object, after: TenantContext): TenantContext {
  const dropped: Record<string, undefined> = {};
  for (const key of Object.keys(before)) if (!Object.hasOwn(after, key)) dropped[key] = undefined;
  return { ...dropped, ...after } as TenantContext;
}

/**
 * The tenant actor's machine (one actor per tenant): `new` until `tenant.create`, then
 * `active` | `draining` | `killed`, moved between by kill / drain / resume. Pure: use it with
 * `initialTransition(tenantMachine, { id })` and `transition()`; every event carries `now`.
 *
 * Answers: every accepted command emits exactly one `runway.answer` with a closed value
 * (`TenantAnswer`), refusals included — an admission refused (`tenant_killed`,
 * `tenant_draining`, `day_cap_reached`) or queued (`queued` + reason) is a transition that
 * answers and leaves the context untouched (no assign). A command the state does not accept
 * (anything but `tenant.create` while `new`) has no transition: the host answers it `refused`.
 * Decisions that change the tenant (create, put, kill, drain, resume) also emit a
 * `runway.publish` to `rw.audit.<tenant>.tenant`.
 */
export const tenantMachine = setup({
  types: { context: {} as TenantContext, events: {} as TenantEvent, input: {} as TenantInput | undefined, emitted: {} as TenantEffect },
  guards: {
    movesTo: ({ context, event }, params: { to: TenantState }) => applyTenantCommand(context, event).context.state === params.to,
  },
  actions: {
    apply: enqueueActions(({ context, event, enqueue }) => {
      const next = applyTenantCommand(context, event);
      if (next.context !== context) enqueue.assign(() => replacing(context, next.context));
      for (const effect of next.effects) enqueue.emit(effect);
    }),
  },
}).createMachine({
  id: "tenant",
  initial: "new",
  context: ({ input }) => newTenant(input?.id ?? ""),
  states: statesFromTable(),
});

export type TenantMachine = typeof tenantMachine;
