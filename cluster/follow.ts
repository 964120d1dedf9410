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
  const pollMs = options.pollMs ?? 2_000;
  const inbox: FollowedEvent[] = [];
  let wake: (() => void) | undefined;
  const sub: Subscription = nc.subscribe(options.tree ? `rw.evt.${tenant}.${runId}.>` : `rw.evt.${tenant}.*.${runId}.*`, {
    callback: (err, msg) => {
      if (err) return;
      try {
        inbox.push(msg.json<FollowedEvent>());
      } catch {
        return;
      }
      wake?.();
    },
  });
  let cursor = options.after;
  const newer = (e: FollowedEvent) => e.id !== undefined && (cursor === undefined || order(e.id, cursor) > 0);
  /** The last event id yielded of each descendant (`tree`). */
  const others = new Map<string, string>();
  /** A page of stored events; while no node answers (one restarting), asked again every `pollMs`. */
  const pageAfter = async (after: string | undefined) => {
    for (;;) {
      try {
        return await client.runEvents(runId, after !== undefined ? { after } : {});
      } catch (err) {
        // A fault the service answered (500) is not retried; its absence or a 503 is.
        if (options.signal?.aborted || (err instanceof ApiFault && err.code !== 503)) throw err;
        await new Promise((r) => setTimeout(r, pollMs));
      }
    }
  };
  try {
    await nc.flush();
    /**
     * Live-only events of this run waiting in the inbox that happened before `stored` (earlier,
     * or at the same time and about the same step), taken out in the order they came.
     */
    const liveBefore = function* (stored: FollowedEvent): Generator<FollowedEvent> {
      for (let i = 0; i < inbox.length;) {
        const l = inbox[i]!;
        if (l.run === runId && l.id === undefined && (l.at < stored.at || (l.at === stored.at && l.node === stored.node && l.item === stored.item))) {
          inbox.splice(i, 1);
          yield l;
        } else i++;
      }
    };
    /** Reads the journal from the cursor on: every stored event not yielded yet, live-only ones that came meanwhile in their place. */
    const catchUp = async function* (): AsyncGenerator<FollowedEvent> {
      for (;;) {
        const page = await pageAfter(cursor);
        if (page.outcome !== "events") throw new Error(`${runId}: ${page.outcome}`);
        for (const e of page.events as FollowedEvent[]) {
          if (!newer(e)) continue;
          yield* liveBefore(e);
          cursor = e.id;
          yield e;
        }
        if (!page.more) return;
      }
    };
    for await (const e of catchUp()) {
      yield e;
      if (TERMINAL_EVENT_TYPES.has(e.type)) return;
    }
    while (!options.signal?.aborted) {
      const e = inbox.shift();
      if (e) {
        if (e.run !== runId) {
          const seen = others.get(e.run);
          if (e.id !== undefined && seen !== undefined && order(e.id, seen) <= 0) continue;
          if (e.id !== undefined) others.set(e.run, e.id);
          yield e;
          continue;
        }
        if (e.id === undefined) {
          yield e;
          continue;
        }
        if (!newer(e)) continue;
        // A stored event heard live: read the journal up to it, so one lost live before it (a
        // slow consumer, a node killed between its write and its publish) comes first, in order.
        for (let tries = 0; newer(e) && tries < 4; tries++) {
          if (tries > 0) await new Promise((r) => setTimeout(r, 50));
          for await (const stored of catchUp()) {
            yield stored;
            if (TERMINAL_EVENT_TYPES.has(stored.type)) return;
          }
        }
        // A journal read from a replica behind the leader may not hold it yet: the live copy stands in.
        if (!newer(e)) continue;
        cursor = e.id;
        yield e;
        if (TERMINAL_EVENT_TYPES.has(e.type)) return;
        continue;
      }
      const heard = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), pollMs);
        wake = () => {
          clearTimeout(timer);
          resolve(true);
        };
        options.signal?.addEventListener("abort", wake, { once: true });
      });
      if (wake) options.signal?.removeEventListener("abort", wake);
      wake = undefined;
      if (heard) continue;
      // Quiet for a while: whatever live delivery missed is in the journal.
      for await (const e of catchUp()) {
        yield e;
        if (TERMINAL_EVENT_TYPES.has(e.type)) return;
      }
    }
  } finally {
    sub.unsubscribe();
  }
}
