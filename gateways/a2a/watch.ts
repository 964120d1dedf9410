import type { NatsConnection } from "@nats-io/transport-node";
import type { RunService } from "../api/run-service.js";

/**
 * Yields whenever a run may have changed: the cue for the caller to read the run again. It yields
 * once at once, subscribed to the run's live event subject (the caller's read then covers what came
 * before), then on each live event; without one for `pollMs`, it reads the run's journal
 * (`runs.events` after the last event it saw) and yields when it holds new events. The journal is
 * what it trusts: an event whose live copy was lost (a node killed between its write and its
 * publish) is still seen, and a watcher on any node sees the same run.
 */
export async function* runChanges(
  deps: { nc: NatsConnection; runs: RunService },
  tenant: string,
  runId: string,
  options: { pollMs: number; signal: AbortSignal },
): AsyncGenerator<void> {
  let wake: (() => void) | undefined;
  let heard = false;
  const sub = deps.nc.subscribe(`rw.evt.${tenant}.*.${runId}.*`, {
    callback: () => {
      heard = true;
      wake?.();
    },
  });
  let cursor: string | undefined;
  try {
    await deps.nc.flush();
    for (let live = true; !options.signal.aborted;) {
      heard = false;
      if (live) yield;
      else {
        let fresh = false;
        for (;;) {
          const page = await deps.runs.events(tenant, runId, { ...(cursor !== undefined ? { after: cursor } : {}), limit: 1_000 });
          if (page.outcome !== "events") return;
          if (page.events.length > 0) fresh = true;
          cursor = page.last ?? cursor;
          if (!page.more) break;
        }
        if (fresh) yield;
      }
      // An event heard while the caller read: read again at once.
      if (heard || options.signal.aborted) {
        live = true;
        continue;
      }
      live = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => done(false), options.pollMs);
        function done(woken: boolean) {
          clearTimeout(timer);
          wake = undefined;
          options.signal.removeEventListener("abort", aborted);
          resolve(woken);
        }
        const aborted = () => done(false);
        wake = () => done(true);
        options.signal.addEventListener("abort", aborted, { once: true });
      });
    }
  } finally {
    sub.unsubscribe();
  }
}
