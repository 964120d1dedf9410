import { z } from "zod";
import { DEFAULT_INTERACTIVE_SOURCES } from "./settings.js";

/** The lane a run is scheduled in: the one definition of it (run seeds, the API's runs.start, the client). */
export const RunLaneSchema = z.enum(["interactive", "batch", "migration"]);
export type RunLane = z.infer<typeof RunLaneSchema>;

export type LaneDecision = { ok: true; lane: RunLane } | { ok: false; reason: string };

/**
 * The lane a top-level start runs in, from who asks (C037): the interactive lane (the scheduler's
 * reserve) belongs to the sources the tenant lists in `interactive_sources` (a record stored
 * before the setting existed lists the default). A start that names no lane is interactive for
 * such a source and batch for any other; naming interactive from another source is refused, so
 * a service's flood never takes the reserve by asking for it.
 */
export function laneFor(requested: RunLane | undefined, source: string, interactiveSources: readonly string[] | undefined): LaneDecision {
  const allowed = (interactiveSources ?? DEFAULT_INTERACTIVE_SOURCES).includes(source);
  if (requested === undefined) return { ok: true, lane: allowed ? "interactive" : "batch" };
  if (requested === "interactive" && !allowed)
    return { ok: false, reason: `source ${source} may not start interactive runs in this tenant (its interactive_sources)` };
  return { ok: true, lane: requested };
}
