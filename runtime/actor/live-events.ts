import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../log.js";

export interface LiveEventStats {
  published: number;
  /** Events the client refused to send (larger than the server's max payload, or the connection closed). */
  dropped: number;
}

/**
 * Live progress events: plain NATS publishes, not stored by the server and never awaited. They are
 * already durable as entries of their transition's record (the journal), so a reader that was away
 * reads them back there under the same `id`; an outage of live delivery loses nothing (DESIGN
 * invariant 11).
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
