import { DEFAULT_INTERACTIVE_SOURCES } from "./settings.js";

export type StartLane = "interactive" | "batch" | "migration";

export type LaneDecision = { ok: true; lane: StartLane } | { ok: false; reason: string };

/**
 * The lane a top-level start runs in, from who asks (C037): the interactive lane (the scheduler's
 * reserve) belongs to the sources the tenant lists in `interactive_sources` (a record stored
 * before the setting existed lists the default). A start that names no lane is interactive for
 * such a source and batch for any other; naming interactive from another source is refused, so
 * a service's flood never takes the reserve by asking for it.
 */
export function laneFor(requested: StartLane | undefined, source: string, interactiveSources: readonly string[] | undefined): LaneDecision {
  const allowed = (interactiveSources ?? DEFAULT_INTERACTIVE_SOURCES).includes(source);
  if (requested === undefined) return { ok: true, lane: allowed ? "interactive" : "batch" };
  if (requested === "interactive" && !allowed)
    return { ok: false, reason: `source ${source} may not start interactive runs in this tenant (its interactive_sources)` };
  return { ok: true, lane: requested };
}
