import type { NatsConnection } from "@nats-io/transport-node";
import { eventBody, eventId, jsonBytes, readJournal, type ActorRecord } from "../../runtime/index.js";
import { RUN_KIND } from "./actor.js";

/** A progress event as published live and as read back: its id (`<revision>.<index>`), type, run, time, and what the run said. */
export type RunEvent = { id: string; type: string; run: string; at: number } & Record<string, unknown>;

export type RunEventsPage =
  | {
      outcome: "read";
      events: RunEvent[];
      /** The last event's id, or the `after` asked for when there was none. */
      last: string | null;
      /** True when the page stopped at a bound: ask again with `after: last`. */
      more: boolean;
      /** No record of the run was read from `after` on (it may not exist, or was compacted). */
      empty: boolean;
    }
  | { outcome: "unavailable"; detail: string }
  | { outcome: "corrupt"; detail: string };

/** Journal records read per request: a run head is a few KB; at most 64 KiB. */
const RECORDS_PER_READ = 64;
/** A page's events as JSON stay under this, well below a reply's max payload. */
export const MAX_EVENTS_BYTES = 256 * 1024;

/** The events of one stored record of a run, with their ids. */
export function eventsOf(revision: number, record: ActorRecord): RunEvent[] {
  const out: RunEvent[] = [];
  for (const entry of record.outbox) {
    if (entry.effect.type !== "runway.event") continue;
    out.push(eventBody(eventId(revision, out.length), entry.effect.data) as RunEvent);
  }
  return out;
}

/**
 * A page of a run's progress events after the event `after` (`[revision, index]`; none: from
 * the first), read back from its journal: the events each stored transition carried, in the
 * order they were stored, with the ids they were published live with. At most `limit` events
 * and about MAX_EVENTS_BYTES. `step_started` is live only (it is published by the executor,
 * not stored by the run): the stored record of an attempt is its outcome.
 */
export async function readRunEvents(
  nc: NatsConnection,
  partitions: number,
  runId: string,
  options: { after?: [number, number]; limit: number },
): Promise<RunEventsPage> {
  const [afterRevision, afterIndex] = options.after ?? [0, -1];
  const events: RunEvent[] = [];
  let bytes = 0;
  let empty = true;
  for (let from = Math.max(1, afterRevision); ;) {
    const read = await readJournal(nc, partitions, RUN_KIND, runId, runId, from, RECORDS_PER_READ);
    if (read.outcome !== "read") return read;
    for (const entry of read.entries) {
      empty = false;
      for (const [index, event] of eventsOf(entry.seq, entry.record).entries()) {
        if (entry.seq === afterRevision && index <= afterIndex) continue;
        const size = jsonBytes(event);
        if (events.length >= options.limit || (events.length > 0 && bytes + size > MAX_EVENTS_BYTES)) return page(events, options.after, true, empty);
        events.push(event);
        bytes += size;
      }
      from = entry.seq + 1;
    }
    if (!read.more) return page(events, options.after, false, empty);
  }
}

function page(events: RunEvent[], after: [number, number] | undefined, more: boolean, empty: boolean): RunEventsPage {
  const last = events.at(-1)?.id ?? (after ? eventId(after[0], after[1]) : null);
  return { outcome: "read", events, last, more, empty };
}
