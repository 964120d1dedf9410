import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import type { PublishOutcome } from "../nats/jetstream.js";

/** One best-effort event: its deterministic id (the outbox entry's, used as `Nats-Msg-Id`), subject and body. */
export interface SpooledEvent {
  id: string;
  subject: string;
  data: Uint8Array;
}

export interface EventSpoolLimits {
  /** Events held at most (queued and in flight); one offered beyond it is dropped. Default 100,000. */
  maxEvents?: number;
  /** Bytes (subject + body) held at most; an event offered beyond it is dropped. Default 64 MiB. */
  maxBytes?: number;
}

export interface EventSpoolOptions extends EventSpoolLimits {
  publish(event: SpooledEvent): Promise<PublishOutcome>;
  logger?: Logger;
  /** Publishes one lane keeps in flight at once (pipelined in order on one connection). Default 64. */
  batch?: number;
  /** Backoff of the outage probe: first and longest wait between probes. Defaults 50 ms and 2 s. */
  retryBaseMs?: number;
  retryMaxMs?: number;
}

export const DEFAULT_SPOOL_MAX_EVENTS = 100_000;
export const DEFAULT_SPOOL_MAX_BYTES = 64 * 1024 * 1024;

export type DropReason = "full" | "rejected" | "stopped";

export interface EventSpoolStats {
  /** Events the stream stored (or recognised as duplicates of an earlier publish). */
  published: number;
  /** Events given up, by reason: the spool was full, the server refused them, the node stopped first. */
  dropped: Record<DropReason, number>;
}

interface Lane {
  key: string;
  items: SpooledEvent[];
  head: number;
  running: boolean;
}

interface Outage {
  prober: Lane | undefined;
  delayMs: number;
  gate: Promise<void>;
  open(): void;
}

/**
 * Publishes best-effort progress events in the background, so that an events outage never holds
 * an actor's acknowledgement or its next transition.
 *
 * - **Order per lane.** Events offered under one lane key (the emitting actor) are published in
 *   the order offered; lanes run concurrently. Within a lane up to `batch` publishes are in flight
 *   at once, pipelined on one connection, so they arrive in order; only a publish that fails while
 *   a later one of the same batch lands (the stream coming back mid-batch) is stored out of order,
 *   later, with its own id.
 * - **Outages.** A publish that is not known to be refused (no responders, timeouts, JetStream
 *   unavailable) is kept. The first such failure closes a gate: every lane waits, and one lane
 *   probes with its oldest event under capped exponential backoff until a publish is stored; then
 *   all lanes resume. So a missing stream costs one probe per backoff, not one per actor.
 * - **Bounded.** At most `maxEvents` events and `maxBytes` bytes are held; an event offered beyond
 *   either is dropped (the newest go: what a lane publishes stays a prefix of what it emitted) and
 *   counted. A publish the server refuses (bad subject, limits) is dropped and counted at once.
 * - **Idempotent.** An event offered while one with the same id is held is ignored; a re-publish
 *   of an event already stored is dropped by the stream's duplicate window (`Nats-Msg-Id`).
 */
export class EventSpool {
  readonly stats: EventSpoolStats = { published: 0, dropped: { full: 0, rejected: 0, stopped: 0 } };
  private readonly lanes = new Map<string, Lane>();
  private readonly held = new Set<string>();
  private count = 0;
  private bytes = 0;
  private outage: Outage | undefined;
  private closed = false;
  private full = false;
  private readonly wakeups = new Set<() => void>();
  private drained: (() => void)[] = [];
  private readonly maxEvents: number;
  private readonly maxBytes: number;
  private readonly batch: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly logger: Logger;

  constructor(private readonly options: EventSpoolOptions) {
    this.maxEvents = options.maxEvents ?? DEFAULT_SPOOL_MAX_EVENTS;
    this.maxBytes = options.maxBytes ?? DEFAULT_SPOOL_MAX_BYTES;
    this.batch = Math.max(1, options.batch ?? 64);
    this.retryBaseMs = options.retryBaseMs ?? 50;
    this.retryMaxMs = options.retryMaxMs ?? 2_000;
    this.logger = options.logger ?? silentLogger;
  }

  /** Events held now: queued or in flight. */
  get spooled(): number {
    return this.count;
  }

  /** Hands an event to the spool; never waits. */
  offer(lane: string, event: SpooledEvent): void {
    if (this.closed) {
      this.stats.dropped.stopped++;
      return;
    }
    if (this.held.has(event.id)) return;
    const size = sizeOf(event);
    if (this.count + 1 > this.maxEvents || this.bytes + size > this.maxBytes) {
      this.stats.dropped.full++;
      if (!this.full) {
        this.full = true;
        this.logger.warn("event spool full: dropping new progress events", { held: this.count, bytes: this.bytes });
      }
      return;
    }
    this.held.add(event.id);
    this.count++;
    this.bytes += size;
    let l = this.lanes.get(lane);
    if (!l) {
      l = { key: lane, items: [], head: 0, running: false };
      this.lanes.set(lane, l);
    }
    l.items.push(event);
    if (!l.running) {
      l.running = true;
      void this.pump(l);
    }
  }

  /** Resolves once nothing is held, or after `deadlineMs`; true when empty. */
  async flush(deadlineMs: number): Promise<boolean> {
    if (this.count === 0) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const emptied = new Promise<boolean>((resolve) => this.drained.push(() => resolve(true)));
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), deadlineMs)));
    try {
      return await Promise.race([emptied, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Flushes for up to `deadlineMs`, then stops; what is still held is dropped and counted (`stopped`). */
  async close(deadlineMs: number): Promise<void> {
    if (this.closed) return;
    await this.flush(deadlineMs);
    this.closed = true;
    if (this.count > 0) {
      this.stats.dropped.stopped += this.count;
      this.logger.warn("event spool stopped with events unpublished", { dropped: this.count });
    }
    this.lanes.clear();
    this.held.clear();
    this.count = 0;
    this.bytes = 0;
    this.outage?.open();
    for (const wake of [...this.wakeups]) wake();
    this.settleDrained();
  }

  private async pump(lane: Lane): Promise<void> {
    try {
      while (!this.closed && lane.head < lane.items.length) {
        const outage = this.outage;
        if (outage && outage.prober && outage.prober !== lane) {
          await outage.gate;
          continue;
        }
        if (outage) {
          outage.prober = lane;
          await this.pause(outage.delayMs);
          if (this.closed) return;
        }
        const probing = outage !== undefined;
        const batch = lane.items.slice(lane.head, lane.head + (probing ? 1 : this.batch));
        const outcomes = await Promise.all(batch.map((e) => this.publishOne(e)));
        if (this.closed) return;
        const kept: SpooledEvent[] = [];
        outcomes.forEach((o, i) => {
          const event = batch[i]!;
          if (o.outcome === "unavailable" || o.outcome === "unknown") {
            kept.push(event);
            return;
          }
          if (o.outcome === "stored") this.stats.published++;
          else {
            this.stats.dropped.rejected++;
            this.logger.warn("progress event refused (by the server, or too large to send); dropped", {
              subject: event.subject,
              id: event.id,
              outcome: o.outcome,
              detail: "detail" in o ? o.detail : "",
            });
          }
          this.release(event);
        });
        // The batch leaves the head; the events still unpublished go back in front, in order.
        lane.head += batch.length;
        for (let i = kept.length - 1; i >= 0; i--) lane.items[--lane.head] = kept[i]!;
        if (lane.head > 1_024 && lane.head * 2 > lane.items.length) {
          lane.items = lane.items.slice(lane.head);
          lane.head = 0;
        }
        if (kept.length > 0)
          this.trip(
            lane,
            outcomes.find((o) => o.outcome === "unavailable" || o.outcome === "unknown"),
          );
        else if (probing) this.recover();
      }
    } finally {
      lane.running = false;
      if (this.outage?.prober === lane) this.outage.prober = undefined;
      // The loop ends only when the lane is empty or the spool closed.
      this.lanes.delete(lane.key);
    }
  }

  private async publishOne(event: SpooledEvent): Promise<PublishOutcome> {
    try {
      return await this.options.publish(event);
    } catch (err) {
      return { outcome: "unknown", detail: err instanceof Error ? err.message : String(err) };
    }
  }

  private trip(lane: Lane, cause: PublishOutcome | undefined): void {
    if (!this.outage) {
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      this.outage = { prober: lane, delayMs: this.retryBaseMs, gate, open };
      this.logger.warn("progress events unavailable: spooling", { held: this.count, detail: cause && "detail" in cause ? cause.detail : undefined });
      return;
    }
    if (this.outage.prober === lane) this.outage.delayMs = Math.min(this.outage.delayMs * 2, this.retryMaxMs);
  }

  private recover(): void {
    const outage = this.outage;
    if (!outage) return;
    this.outage = undefined;
    this.logger.info("progress events available again", { held: this.count });
    outage.open();
  }

  private release(event: SpooledEvent): void {
    this.held.delete(event.id);
    this.count--;
    this.bytes -= sizeOf(event);
    if (this.full && this.count < this.maxEvents && this.bytes < this.maxBytes) {
      this.full = false;
      this.logger.info("event spool has room again", { dropped: this.stats.dropped.full });
    }
    if (this.count === 0) this.settleDrained();
  }

  private settleDrained(): void {
    const waiters = this.drained;
    this.drained = [];
    for (const w of waiters) w();
  }

  /** Waits `ms`, or less if the spool closes. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeups.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeups.add(done);
    });
  }
}

function sizeOf(event: SpooledEvent): number {
  return event.subject.length + event.data.byteLength;
}
