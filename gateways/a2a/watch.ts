import type { NatsConnection } from "@nats-io/transport-node";
import type { RunService } from "../api/run-service.js";

/**
 * Yields whenever a run's journal holds events past the last ones seen: the cue to read the run
 * again. Its live subject wakes it at once; the journal (`runs.events` after a cursor) is what it
 * trusts, read on each wake and every `pollMs`, so an event whose live copy was lost (a node killed
 * between its write and its publish) is still seen, and a watcher on any node sees the same run.
 * The first pass yields once at once (the caller's snapshot may be older than the journal's end).
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
    for (let first = true; !options.signal.aborted; first = false) {
      heard = false;
      let fresh = false;
      for (;;) {
        const page = await deps.runs.events(tenant, runId, { ...(cursor !== undefined ? { after: cursor } : {}), limit: 1_000 });
        if (page.outcome !== "events") return;
        if (page.events.length > 0) fresh = true;
        cursor = page.last ?? cursor;
        if (!page.more) break;
      }
      if (fresh || first) yield;
      if (heard || options.signal.aborted) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, options.pollMs);
        function done() {
          clearTimeout(timer);
          wake = undefined;
          options.signal.removeEventListener("abort", done);
          resolve();
        }
        wake = done;
        options.signal.addEventListener("abort", done, { once: true });
      });
    }
  } finally {
    sub.unsubscribe();
  }
}
