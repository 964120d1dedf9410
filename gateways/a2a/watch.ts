import type { NatsConnection } from "@nats-io/transport-node";
import type { RunService } from "../api/run-service.js";

/** A piece of text an agent node's model streamed (a live `text_delta` event, docs/agents.md#live-tokens). */
export interface TextDelta {
  node: string;
  attempt: number;
  turn: number;
  seq: number;
  text: string;
}

/** `changed`: read the run again. `text`: a live token, only when asked for (`text: true`). */
export type RunChange = { kind: "changed" } | ({ kind: "text" } & TextDelta);

const CHANGED: RunChange = { kind: "changed" };

/**
 * Yields whenever a run may have changed: the cue for the caller to read the run again. It yields
 * once at once, subscribed to the run's live event subject (the caller's read then covers what came
 * before), then on each live event; without one for `pollMs`, it reads the run's journal
 * (`runs.events` after the last event it saw) and yields when it holds new events. The journal is
 * what it trusts: an event whose live copy was lost (a node killed between its write and its
 * publish) is still seen, and a watcher on any node sees the same run. Only the run's own events
 * (`run_*`) are a change: a step's do not move its task. Live tokens are no change either: with
 * `text`, each is yielded as it is, else they are not listened to.
 */
export async function* runChanges(
  deps: { nc: NatsConnection; runs: RunService },
  tenant: string,
  runId: string,
  options: { pollMs: number; signal: AbortSignal; text?: boolean },
): AsyncGenerator<RunChange> {
  let wake: ((why: "event" | "text") => void) | undefined;
  let heard = false;
  const texts: TextDelta[] = [];
  const sub = deps.nc.subscribe(`rw.evt.${tenant}.*.${runId}.*`, {
    callback: (err, msg) => {
      if (err) return;
      if (msg.subject.endsWith(".text_delta")) {
        if (!options.text) return;
        const delta = textDeltaOf(msg.string());
        if (!delta) return;
        texts.push(delta);
        wake?.("text");
        return;
      }
      // Only a run's own events change its task (state, status message, result): a step's never do.
      if (!msg.subject.slice(msg.subject.lastIndexOf(".") + 1).startsWith("run_")) return;
      heard = true;
      wake?.("event");
    },
  });
  let cursor: string | undefined;
  try {
    await deps.nc.flush();
    for (let read: "live" | "journal" | "none" = "live"; !options.signal.aborted;) {
      if (read === "live") {
        heard = false;
        yield CHANGED;
      } else if (read === "journal") {
        heard = false;
        let fresh = false;
        for (;;) {
          const page = await deps.runs.events(tenant, runId, { ...(cursor !== undefined ? { after: cursor } : {}), limit: 1_000 });
          if (page.outcome !== "events") return;
          if (page.events.length > 0) fresh = true;
          cursor = page.last ?? cursor;
          if (!page.more) break;
        }
        if (fresh) yield CHANGED;
      }
      while (texts.length > 0) yield { kind: "text", ...texts.shift()! };
      // An event heard while the caller read: read again at once.
      if (heard || options.signal.aborted) {
        read = "live";
        continue;
      }
      read = await new Promise<"live" | "journal" | "none">((resolve) => {
        const timer = setTimeout(() => done("journal"), options.pollMs);
        function done(next: "live" | "journal" | "none") {
          clearTimeout(timer);
          wake = undefined;
          options.signal.removeEventListener("abort", aborted);
          resolve(next);
        }
        const aborted = () => done("none");
        wake = (why) => done(why === "event" ? "live" : "none");
        options.signal.addEventListener("abort", aborted, { once: true });
      });
    }
  } finally {
    sub.unsubscribe();
  }
}

function textDeltaOf(body: string): TextDelta | undefined {
  try {
    const e = JSON.parse(body) as Partial<TextDelta>;
    if (typeof e.node !== "string" || typeof e.text !== "string" || typeof e.turn !== "number" || typeof e.seq !== "number" || typeof e.attempt !== "number")
      return undefined;
    return { node: e.node, attempt: e.attempt, turn: e.turn, seq: e.seq, text: e.text };
  } catch {
    return undefined;
  }
}
