import { enqueueActions, setup } from "xstate";
import { applyTenantCommand } from "./apply.js";
import { newTenant, type TenantContext } from "./decide.js";
import { TENANT_STATES, type TenantCommandType, type TenantEffect, type TenantEvent, type TenantInput, type TenantState } from "./events.js";
import { mergeSettings } from "./settings.js";
import { leftAfterChunk, upgrade } from "./migrate.js";
import { TENANT_TRANSITIONS } from "./table.js";

/** The named action of each command: its decision (`decide.ts`), applied once. */
const ACTION_OF = {
  "tenant.create": "create",
  "tenant.put": "putSettings",
  "tenant.kill": "kill",
  "tenant.drain": "drain",
  "tenant.resume": "resume",
  "tenant.admit_run": "admitRun",
  "tenant.run_ended": "runEnded",
  "tenant.recheck": "recheck",
  "tenant.admit_expansion": "admitExpansion",
  "tenant.release_expansion": "releaseExpansion",
  "tenant.promote": "promote",
  "tenant.migrate": "migrate",
} as const satisfies Record<TenantCommandType, string>;
type ActionName = (typeof ACTION_OF)[TenantCommandType];

/**
 * What lets a command move the tenant, read off the command and the context before it is
 * decided (the decision itself runs once, in the command's action): a create with valid settings
 * leaves `new`; a resume waits (and stays) while an older-format record still has members
 * to move out after this transition's chunk; kill and drain always move.
 */
const MOVE_GUARD: Partial<Record<TenantCommandType, "createValid" | "notHeldByMigration">> = {
  "tenant.create": "createValid",
  "tenant.resume": "notHeldByMigration",
};

type Move = { target: TenantState; guard?: "createValid" | "notHeldByMigration"; actions: ActionName };
type Stay = { actions: ActionName };
type StateConfig = { on: Partial<Record<TenantCommandType, Stay | Move | [Move, Stay]>> };

/** The state nodes, generated from {@link TENANT_TRANSITIONS}: a command that moves is a real transition, its guard (if any) a predicate of the command. */
function statesFromTable(): Record<TenantState, StateConfig> {
  const states = {} as Record<TenantState, StateConfig>;
  for (const state of TENANT_STATES) {
    const on: StateConfig["on"] = {};
    for (const [command, to] of Object.entries(TENANT_TRANSITIONS[state]) as [TenantCommandType, TenantState][]) {
      const actions = ACTION_OF[command];
      const guard = MOVE_GUARD[command];
      if (to === state) on[command] = { actions };
      else on[command] = guard ? [{ target: to, guard, actions }, { actions }] : { target: to, actions };
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

/** The action of one command: the next context and its effects, from one decision. */
function command<T extends TenantCommandType>(type: T) {
  return enqueueActions<TenantContext, TenantEvent, undefined, TenantEvent, never, never, never, never, TenantEffect>(({ context, event, enqueue }) => {
    if (event.type !== type) return;
    const next = applyTenantCommand(context, event);
    if (next.context !== context) enqueue.assign(() => replacing(context, next.context));
    for (const effect of next.effects) enqueue.emit(effect);
  });
}

/**
 * The tenant actor's machine: `new` until `tenant.create`, then `active` | `draining` | `killed`.
 * Every accepted command answers exactly once with a closed `TenantAnswer`; a refusal or a
 * `queued` is a transition that answers and leaves the context untouched. A command the state does
 * not take has no transition (the host answers `refused`). Changes to the tenant are audited
 * (`rw.audit.<tenant>.tenant`).
 */
export const tenantMachine = setup({
  types: { context: {} as TenantContext, events: {} as TenantEvent, input: {} as TenantInput | undefined, emitted: {} as TenantEffect },
  guards: {
    /** A create that makes the tenant: it has an id, and its settings are valid. */
    createValid: ({ context, event }) => event.type === "tenant.create" && !!context.id && mergeSettings(undefined, event.settings).ok,
    /** No members of an older-format record are left after this transition's chunk (`migrate.ts`). */
    notHeldByMigration: ({ context }) => leftAfterChunk(upgrade(context)) === 0,
  },
  actions: {
    create: command("tenant.create"),
    putSettings: command("tenant.put"),
    kill: command("tenant.kill"),
    drain: command("tenant.drain"),
    resume: command("tenant.resume"),
    admitRun: command("tenant.admit_run"),
    runEnded: command("tenant.run_ended"),
    recheck: command("tenant.recheck"),
    admitExpansion: command("tenant.admit_expansion"),
    releaseExpansion: command("tenant.release_expansion"),
    promote: command("tenant.promote"),
    migrate: command("tenant.migrate"),
  },
}).createMachine({
  id: "tenant",
  initial: "new",
  context: ({ input }) => newTenant(input?.id ?? ""),
  states: statesFromTable(),
});

export type TenantMachine = typeof tenantMachine;
