import { TENANT_STATES, type LiveTenantState, type TenantCommandType, type TenantState } from "./events.js";

/** The state each live-state command leads to; the other commands leave the state as it is. */
export const STATE_COMMANDS = { "tenant.kill": "killed", "tenant.drain": "draining", "tenant.resume": "active" } as const satisfies Partial<
  Record<TenantCommandType, LiveTenantState>
>;

function live(state: LiveTenantState): Partial<Record<TenantCommandType, TenantState>> {
  return {
    "tenant.create": state,
    "tenant.put": state,
    "tenant.admit_run": state,
    "tenant.run_ended": state,
    "tenant.recheck": state,
    "tenant.admit_expansion": state,
    "tenant.release_expansion": state,
    "tenant.promote": state,
    "tenant.migrate": state,
    ...STATE_COMMANDS,
  };
}

/**
 * The tenant machine's table: for each state, the commands it accepts and the state each one
 * leads to. A command missing from a state's row is refused by the host (`snapshot.can()` is
 * false: `{ outcome: 'refused', state }`, no write); every accepted command is answered by the
 * machine with a closed `runway.answer`, even when it changes nothing. A `new` tenant accepts
 * only `tenant.create` (which stays `new` when its settings are invalid).
 */
export const TENANT_TRANSITIONS: Readonly<Record<TenantState, Readonly<Partial<Record<TenantCommandType, TenantState>>>>> = Object.freeze({
  new: { "tenant.create": "active" },
  active: live("active"),
  draining: live("draining"),
  killed: live("killed"),
});

export function isLiveState(state: TenantState): state is LiveTenantState {
  return state !== "new" && (TENANT_STATES as readonly string[]).includes(state);
}
