// The soak's cancel checks (docs/soak.md, `cancels`): which cancelled runs did work after their
// cancel, and which children of a cancelled tree ended otherwise after it.
import type { NatsConnection, Subscription } from "@nats-io/transport-node";

/** A run event as the soak reads it (`runs.events`). */
export type SoakEvent = { type: string; at: number; node?: string; attempt?: number; item?: number; child?: string; not_before?: number };
/** A handler invocation from the step ledger; `step` is `node` or `node[item]`. */
export type LedgerLine = { run: string; step: string; attempt: number; at: number };

export interface CancelChecks {
  cancelledRuns: number;
  /** A cancelled run that afterwards committed a step, ended otherwise, or started work it could not have been offered before the cancel. */
  resurrected: string[];
  /** Attempts offered before the cancel that started on their worker within 1 s after it (the cancel stops them). */
  inFlightAtCancel: number;
  endedOtherwise: string[];
}

/** How long after a cancel an attempt offered before it may still start on its worker. */
export const IN_FLIGHT_MS = 1_000;

const stepOf = (e: SoakEvent): string => (e.item !== undefined ? `${e.node}[${e.item}]` : (e.node ?? ""));

/**
 * An invocation after the cancel was offered before it when it is the step's first attempt, or a
 * retry the run decided and offered in one transition before the cancel (a `step_retrying` due at
 * once: a lost worker's attempt is offered again as its loss is recorded). Any invocation more than
 * `IN_FLIGHT_MS` after the cancel is late, and so is a retry whose offer waited on a backoff.
 */
function offeredBeforeCancel(l: LedgerLine, cancelAt: number, ledger: readonly LedgerLine[], events: readonly SoakEvent[]): boolean {
  if (l.at > cancelAt + IN_FLIGHT_MS) return false;
  if (!ledger.some((b) => b.step === l.step && b.at <= cancelAt)) return true;
  return events.some(
    (e) =>
      e.type === "step_retrying" &&
      stepOf(e) === l.step &&
      e.attempt === l.attempt - 1 &&
      e.at <= cancelAt &&
      e.not_before !== undefined &&
      e.not_before <= e.at,
  );
}

/**
 * When each command to a run was published to its mailbox, seen by a plain subscriber (the
 * mailbox is a work queue: no second consumer may read it). A child of a cancelled tree that ended
 * otherwise then says whether its parent's cancel was sent late or received late.
 */
export class CommandTap {
  private readonly sent = new Map<string, number[]>();
  private constructor(private readonly sub: Subscription) {}

  static start(nc: NatsConnection): CommandTap {
    const sub = nc.subscribe("rw.cmd.*.run.*");
    const tap = new CommandTap(sub);
    void (async () => {
      for await (const m of sub) {
        const id = m.subject.slice(m.subject.lastIndexOf(".") + 1);
        const list = tap.sent.get(id) ?? [];
        list.push(Date.now());
        tap.sent.set(id, list);
      }
    })();
    return tap;
  }

  /** Times commands to `run` were published. */
  sentTo(run: string): readonly number[] {
    return this.sent.get(run) ?? [];
  }

  stop(): void {
    this.sub.unsubscribe();
  }
}

export function cancelChecks(
  events: ReadonlyMap<string, readonly SoakEvent[]>,
  ledgerByRun: ReadonlyMap<string, readonly LedgerLine[]>,
  statusOf: (run: string) => string | undefined,
  /** Times commands to a run were published to its mailbox (`CommandTap`), when tapped. */
  sentTo?: (run: string) => readonly number[],
): CancelChecks {
  const out: CancelChecks = { cancelledRuns: 0, resurrected: [], inFlightAtCancel: 0, endedOtherwise: [] };
  for (const [id, evs] of events) {
    const cancel = evs.find((e) => e.type === "run_cancelled");
    if (!cancel) continue;
    out.cancelledRuns++;
    const ledger = ledgerByRun.get(id) ?? [];
    const after = ledger.filter((l) => l.at > cancel.at);
    const late = after.filter((l) => !offeredBeforeCancel(l, cancel.at, ledger, evs));
    out.inFlightAtCancel += after.length - late.length;
    const otherEnd = evs.find((e) => (e.type === "run_succeeded" || e.type === "run_failed" || e.type === "step_succeeded") && e.at > cancel.at);
    const status = statusOf(id);
    const wrongStatus = status !== undefined && status !== "cancelled";
    if (late.length || otherEnd || wrongStatus)
      out.resurrected.push(
        `${id}: ${late.length} step invocation(s) after the cancel${otherEnd ? `, ${otherEnd.type} after it` : ""}${wrongStatus ? `, status ${status}` : ""}`,
      );
    // A cancel takes the whole tree: a child still live at it should end cancelled too, not otherwise after it.
    for (const child of new Set(evs.flatMap((e) => (e.type === "step_started" && e.child ? [e.child] : [])))) {
      const ended = (events.get(child) ?? []).find((e) => e.type === "run_succeeded" || e.type === "run_failed");
      if (!ended || ended.at <= cancel.at) continue;
      const sent = sentTo?.(child).find((t) => t >= cancel.at);
      const mailbox = !sentTo
        ? ""
        : sent === undefined
          ? "; no command published to it after the cancel"
          : `; a command published to it ${sent - cancel.at} ms after the cancel`;
      out.endedOtherwise.push(`${child}: child of cancelled ${id}, ${ended.type} ${ended.at - cancel.at} ms after the cancel${mailbox}`);
    }
  }
  return out;
}
