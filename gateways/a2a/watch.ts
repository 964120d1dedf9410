import type { NatsConnection, Subscription } from "@nats-io/transport-node";
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

/** A run's own event that never settles its task: the blocking `SendMessage` reads nothing for it. */
const UNSETTLING = new Set(["run_queued", "run_started", "run_cancel_requested", "run_compacted"]);

interface WatchOptions {
  pollMs: number;
  signal: AbortSignal;
  /** Live tokens as changes of their own; else not listened to. */
  text?: boolean;
  /** Only the run's events that may settle its task (end it, or make it ask for input) are a change. */
  settling?: boolean;
}

/**
 * A run's changes, heard from the moment it is made: subscribed to the run's live event subject
 * at once, so a watch made before a request that moves the run (on the same connection: the
 * server takes the subscription first) misses none of the events the request causes. The journal
 * is what it trusts: without a live event for `pollMs`, it reads the run's journal (`runs.events`
 * after the last event it saw) and holds a change when there are new events. So an event whose
 * live copy was lost (a node killed between its write and its publish) is still seen, and a
 * watcher on any node sees the same run. Only the run's own events (`run_*`) are a change: a
 * step's do not move its task.
 */
export class RunWatch {
  private wake: ((why: "event" | "text") => void) | undefined;
  private heard = false;
  private readonly texts: TextDelta[] = [];
  private cursor: string | undefined;
  private readonly sub: Subscription;

  constructor(
    private readonly deps: { nc: NatsConnection; runs: RunService },
    private readonly tenant: string,
    private readonly runId: string,
    private readonly options: WatchOptions,
  ) {
    this.sub = deps.nc.subscribe(`rw.evt.${tenant}.*.${runId}.*`, {
      callback: (err, msg) => {
        if (!err) this.onEvent(msg.subject, msg);
      },
    });
  }

  private onEvent(subject: string, msg: { string(): string }): void {
    const type = subject.slice(subject.lastIndexOf(".") + 1);
    if (type === "text_delta") {
      if (!this.options.text) return;
      const delta = textDeltaOf(msg.string());
      if (!delta) return;
      this.texts.push(delta);
      this.wake?.("text");
      return;
    }
    if (!type.startsWith("run_") || (this.options.settling && UNSETTLING.has(type))) return;
    this.heard = true;
    this.wake?.("event");
  }

  /** Ends the subscription. */
  close(): void {
    this.sub.unsubscribe();
  }

  /**
   * A `changed` whenever the run may have changed since the caller last read it: at once when
   * `first` is `now` (else only for what was heard since the watch was made), then for each live
   * event or new journal events. An event heard while the caller read is a change at once.
   */
  async *changes(first: "now" | "heard"): AsyncGenerator<RunChange> {
    const { signal, pollMs } = this.options;
    for (let read: "live" | "journal" | "none" = first === "now" || this.heard ? "live" : "none"; !signal.aborted;) {
      if (read === "live") {
        this.heard = false;
        yield CHANGED;
      } else if (read === "journal") {
        this.heard = false;
        const fresh = await this.journalMoved();
        if (fresh === undefined) return;
        if (fresh) yield CHANGED;
      }
      while (this.texts.length > 0) yield { kind: "text", ...this.texts.shift()! };
      if (this.heard || signal.aborted) {
        read = "live";
        continue;
      }
      read = await new Promise<"live" | "journal" | "none">((resolve) => {
        const timer = setTimeout(() => done("journal"), pollMs);
        const done = (next: "live" | "journal" | "none") => {
          clearTimeout(timer);
          this.wake = undefined;
          signal.removeEventListener("abort", aborted);
          resolve(next);
        };
        const aborted = () => done("none");
        this.wake = (why) => done(why === "event" ? "live" : "none");
        signal.addEventListener("abort", aborted, { once: true });
      });
    }
  }

  /** Whether the run's journal holds events after the last one read (undefined: the run is gone). */
  private async journalMoved(): Promise<boolean | undefined> {
    let fresh = false;
    for (;;) {
      const page = await this.deps.runs.events(this.tenant, this.runId, { ...(this.cursor !== undefined ? { after: this.cursor } : {}), limit: 1_000 });
      if (page.outcome !== "events") return undefined;
      if (page.events.length > 0) fresh = true;
      this.cursor = page.last ?? this.cursor;
      if (!page.more) return fresh;
    }
  }
}

/**
 * Yields whenever a run may have changed: the cue for the caller to read the run again. It yields
 * once at once, subscribed (the caller's read then covers what came before), then as
 * {@link RunWatch} says; with `text`, each live token as it is.
 */
export async function* runChanges(
  deps: { nc: NatsConnection; runs: RunService },
  tenant: string,
  runId: string,
  options: WatchOptions,
): AsyncGenerator<RunChange> {
  const watch = new RunWatch(deps, tenant, runId, options);
  try {
    await deps.nc.flush();
    yield* watch.changes("now");
  } finally {
    watch.close();
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
