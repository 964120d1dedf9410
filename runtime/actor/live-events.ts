import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../log.js";

export interface LiveEventStats {
  published: number;
  /** Events the client refused to send (larger than the server's max payload, or the connection closed). */
  dropped: number;
}

/**
 * Live progress events: plain NATS publishes, not stored by the server and never awaited.
 *
 * A journaled actor's events are durable already: they are entries of the record of the
 * transition that made them, which its key's history keeps (the journal). So the server is not
 * asked to store them a second time, and a transition never waits on them: a subscriber sees
 * them live, and a reader that was away reads them back from the journal (each event's `id` is
 * the revision of its record and its place there, the same live and read back). An outage of
 * live delivery loses nothing durable (DESIGN invariant 11).
 */
export class LiveEvents {
  readonly stats: LiveEventStats = { published: 0, dropped: 0 };

  constructor(
    private readonly nc: NatsConnection,
    private readonly logger: Logger,
  ) {}

  publish(subject: string, body: unknown): void {
    try {
      this.nc.publish(subject, JSON.stringify(body));
      this.stats.published++;
    } catch (err) {
      this.stats.dropped++;
      this.logger.warn("progress event not published", { subject, error: String((err as Error)?.message ?? err) });
    }
  }
}

/** The id of the `index`-th event (in entry order) of the record stored at `revision`: `<revision>.<index>`. */
export function eventId(revision: number, index: number): string {
  return `${revision}.${index}`;
}

/** An event id as `[revision, index]`, or undefined when it is not one. */
export function parseEventId(id: string): [number, number] | undefined {
  const m = /^([1-9][0-9]{0,15})\.(0|[1-9][0-9]{0,5})$/.exec(id);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}
