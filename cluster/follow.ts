import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { parseEventId } from "../runtime/index.js";
import { ApiFault, type RunwayClient } from "./client.js";

/** A progress event: `id` is `<revision>.<index>` for one stored in the run's journal, absent for a live-only one (`step_started`). */
export type FollowedEvent = { id?: string; type: string; run: string; at: number } & Record<string, unknown>;

export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set(["run_succeeded", "run_failed", "run_cancelled"]);

function order(a: string, b: string): number {
  const [ra, ia] = parseEventId(a) ?? [0, 0];
  const [rb, ib] = parseEventId(b) ?? [0, 0];
  return ra !== rb ? ra - rb : ia - ib;
}

/**
 * Follows one run's events until it ends, each once, in stored order, whatever live delivery lost:
 * it subscribes first, then reads the journal, and a stored event heard live is the cue to read the
 * journal up to it (also every `pollMs`). Live-only events slot in by time. With `tree`, descendants'
 * events come too, live only.
 */
export async function* followRun(
  nc: NatsConnection,
  client: RunwayClient,
  tenant: string,
  runId: string,
  options: { after?: string; pollMs?: number; signal?: AbortSignal; tree?: boolean } = {},
): AsyncGenerator<FollowedEvent> {
  const follow = new Follow(client, runId, options.pollMs ?? 2_000, options.after, options.signal);
  const sub: Subscription = nc.subscribe(options.tree ? `rw.evt.${tenant}.${runId}.>` : `rw.evt.${tenant}.*.${runId}.*`, {
    callback: (err, msg) => {
      if (err) return;
      try {
        follow.hear(msg.json<FollowedEvent>());
      } catch {
        return;
      }
    },
  });
  try {
    await nc.flush();
    if (yield* follow.catchUp()) return;
    while (!options.signal?.aborted) {
      const e = follow.inbox.shift();
      if (e) {
        if (e.run !== runId) {
          if (follow.firstOfDescendant(e)) yield e;
        } else if (e.id === undefined) yield e;
        else if (follow.newer(e) && (yield* follow.upTo(e))) return;
        continue;
      }
      if (await follow.heardWithin()) continue;
      // Quiet for a while: whatever live delivery missed is in the journal.
      if (yield* follow.catchUp()) return;
    }
  } finally {
    sub.unsubscribe();
  }
}

/** What following one run keeps: events heard live and not yet yielded, the journal cursor, the last id seen of each descendant. */
class Follow {
  readonly inbox: FollowedEvent[] = [];
  private wake: (() => void) | undefined;
  /** The last event id yielded of each descendant (`tree`). */
  private readonly others = new Map<string, string>();

  constructor(
    private readonly client: RunwayClient,
    private readonly runId: string,
    private readonly pollMs: number,
    private cursor: string | undefined,
    private readonly signal: AbortSignal | undefined,
  ) {}

  hear(event: FollowedEvent): void {
    this.inbox.push(event);
    this.wake?.();
  }

  /** A stored event of this run not yielded yet. */
  newer(e: FollowedEvent): e is FollowedEvent & { id: string } {
    return e.id !== undefined && (this.cursor === undefined || order(e.id, this.cursor) > 0);
  }

  /** A descendant's event heard for the first time (each once, in the order they arrive). */
  firstOfDescendant(e: FollowedEvent): boolean {
    const seen = this.others.get(e.run);
    if (e.id !== undefined && seen !== undefined && order(e.id, seen) <= 0) return false;
    if (e.id !== undefined) this.others.set(e.run, e.id);
    return true;
  }

  /** A page of stored events; while no node answers (one restarting), asked again every `pollMs`. */
  private async pageAfter(after: string | undefined) {
    for (;;) {
      try {
        return await this.client.runEvents(this.runId, after !== undefined ? { after } : {});
      } catch (err) {
        // A fault the service answered (500) is not retried; its absence or a 503 is.
        if (this.signal?.aborted || (err instanceof ApiFault && err.code !== 503)) throw err;
        await new Promise((r) => setTimeout(r, this.pollMs));
      }
    }
  }

  /**
   * Live-only events of this run waiting in the inbox that happened before `stored` (earlier,
   * or at the same time and about the same step), taken out in the order they came.
   */
  private *liveBefore(stored: FollowedEvent): Generator<FollowedEvent> {
    for (let i = 0; i < this.inbox.length;) {
      const l = this.inbox[i]!;
      if (l.run === this.runId && l.id === undefined && (l.at < stored.at || (l.at === stored.at && l.node === stored.node && l.item === stored.item))) {
        this.inbox.splice(i, 1);
        yield l;
      } else i++;
    }
  }

  /** Reads the journal from the cursor on: every stored event not yielded yet, live-only ones that came meanwhile in their place. Returns whether the run ended. */
  async *catchUp(): AsyncGenerator<FollowedEvent, boolean> {
    for (;;) {
      const page = await this.pageAfter(this.cursor);
      if (page.outcome !== "events") throw new Error(`${this.runId}: ${page.outcome}`);
      for (const e of page.events as FollowedEvent[]) {
        if (!this.newer(e)) continue;
        yield* this.liveBefore(e);
        this.cursor = e.id;
        yield e;
        if (TERMINAL_EVENT_TYPES.has(e.type)) return true;
      }
      if (!page.more) return false;
    }
  }

  /**
   * A stored event heard live: the journal is read up to it, so one lost live before it (a slow
   * consumer, a node killed between its write and its publish) comes first, in order. Returns
   * whether the run ended.
   */
  async *upTo(e: FollowedEvent & { id: string }): AsyncGenerator<FollowedEvent, boolean> {
    for (let tries = 0; this.newer(e) && tries < 4; tries++) {
      if (tries > 0) await new Promise((r) => setTimeout(r, 50));
      if (yield* this.catchUp()) return true;
    }
    // A journal read from a replica behind the leader may not hold it yet: the live copy stands in.
    if (!this.newer(e)) return false;
    this.cursor = e.id;
    yield e;
    return TERMINAL_EVENT_TYPES.has(e.type);
  }

  /** Waits for a live event (true), or `pollMs` or an abort without one (false). */
  async heardWithin(): Promise<boolean> {
    const heard = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.pollMs);
      this.wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.signal?.addEventListener("abort", this.wake, { once: true });
    });
    if (this.wake) this.signal?.removeEventListener("abort", this.wake);
    this.wake = undefined;
    return heard;
  }
}
