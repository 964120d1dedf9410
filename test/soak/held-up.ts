// Which runs a fault held up, and when the last of them moved again (docs/soak.md, "The report").
// Pure: the soak reads the runs' events and the ledger, and hands each run's facts here.

/** What the soak knows of one run (children included), as far as holding up is concerned. */
export interface RunTrack {
  id: string;
  /** Its kind is measured (sequential, wide, parents and their children, tool calls, agents): every progress point counts. */
  measured: boolean;
  /** When it began to wait for its start: the soak's start request, or (a child) its `run_started`. */
  start: number;
  /** Its `run_started`, once it has one. */
  started?: number;
  /** Its end (`run_succeeded`, `run_failed`, `run_cancelled`), if it ended. */
  end?: number;
  /** Its progress points, in order: ledger invocations, journaled step and tool-call events, its end. */
  progress: readonly number[];
  /** The soak started it (not a child): a start of an unmeasured kind held up by the fault counts. */
  soakStarted: boolean;
  /** Its events were read (a run never read cannot be called stuck). */
  read: boolean;
}

/** One fault as the analysis sees it. */
export interface FaultSpan {
  firedAt: number;
  downMs: number;
  /** When the next fault fired, if one did. */
  nextFiredAt?: number;
}

/** A run a fault held up: ms after the fault when its wait began and when it moved again. */
export interface HeldRun {
  run: string;
  waitedFromMs: number;
  movedAtMs: number;
}

export interface HoldUps {
  /** Runs held up (over {@link HELD_MS} without progress). */
  held: HeldRun[];
  /** Runs open in the window that never moved again. */
  stuck: number;
  /** ms from the fault until the last held-up run moved again; 0: none was held up. */
  movingAgainMs: number;
}

/** A run that waits longer than this without progress is held up. */
export const HELD_MS = 1_000;
/** How long after the victim's down time a run's wait may still begin and count for the fault. */
export const AFTERMATH_MS = 15_000;

/**
 * The runs a fault held up. A run open in the fault's window (from the fault until the next one, at
 * most its down time + 15 s) waits from the fault, or from its start if later, to its next progress
 * point; over 1 s is held up. A run is the fault's only if it was held up before the next fault
 * fired: one whose wait began less than 1 s before the next fault and went on past it is that
 * fault's to count (its window holds every run open when it fired), never this one's — else a run
 * started just before a SIGSTOP, and held by it, was charged to the kill before it, from the kill.
 * Runs of unmeasured kinds (sleeping, waiting for a signal or a person, being cancelled) count only
 * while a start of theirs the soak sent is pending: once started, their next move is not theirs.
 */
export function holdUps(fault: FaultSpan, runs: Iterable<RunTrack>): HoldUps {
  const F = fault.firedAt;
  const next = fault.nextFiredAt ?? Infinity;
  const windowEnd = Math.min(F + fault.downMs + AFTERMATH_MS, next);
  const held: HeldRun[] = [];
  let stuck = 0;
  for (const r of runs) {
    if (r.start > windowEnd || (r.end !== undefined && r.end <= F)) continue;
    const from = Math.max(F, r.start);
    if (!r.measured && !(r.soakStarted && r.start >= F && r.started !== undefined && r.started > from)) continue;
    const moved = r.measured ? r.progress.find((t) => t > from) : r.started;
    if (moved === undefined) {
      if (r.read) stuck++;
      continue;
    }
    if (moved - from > HELD_MS && from + HELD_MS < next) held.push({ run: r.id, waitedFromMs: from - F, movedAtMs: moved - F });
  }
  held.sort((a, b) => b.movedAtMs - a.movedAtMs);
  return { held, stuck, movingAgainMs: held[0]?.movedAtMs ?? 0 };
}
