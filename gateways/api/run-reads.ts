import type { NatsConnection } from "@nats-io/transport-node";
import { parseEventId, readActor, RunwayFault } from "../../runtime/index.js";
import {
  compactedView,
  partsHolding,
  readRunEvents,
  recordFacts,
  RUN_RECORD,
  RunIndex,
  tenantOfRun,
  view,
  type RunEvent,
  type RunView,
} from "../../actors/index.js";
import type { ListRunsRequest } from "./schemas.js";

/** A page of a run's progress events (see RunService.events). */
export type RunEventsResult =
  | {
      outcome: "events";
      events: RunEvent[];
      /** The id to ask `after` next: the last event's, or the `after` given when none came. */
      last: string | null;
      /** The page stopped at its bound: more events are stored after `last`. */
      more: boolean;
      /** The run's record was compacted after the ended-run retention: its events are gone. */
      compacted?: true;
    }
  | { outcome: "run_not_found" };

/** Reading runs: a run's record (or its summary once compacted), pages of the runs index, and a run's stored events. */
export class RunReads {
  private readonly index: RunIndex;

  constructor(private readonly deps: { nc: NatsConnection; partitions: number }) {
    this.index = new RunIndex(deps.nc, deps.partitions);
  }

  /**
   * A run as its record says; once the record was compacted (the ended-run retention), its final
   * summary from the runs index (`compacted: true`: no input, nodes or result).
   */
  async get(tenant: string, id: string): Promise<RunView | undefined> {
    return (await this.read(tenant, id))?.view;
  }

  /** {@link get}, and whether the run's tenant counted it from its start (which part of the runs index lists it). */
  private async read(tenant: string, id: string): Promise<{ view: RunView; counted: boolean } | undefined> {
    if (tenantOfRun(id) !== tenant) return undefined;
    // The head, and the journal's first entry (the input), side by side.
    const [read, first] = await Promise.all([readActor(this.deps, RUN_RECORD, id), readActor(this.deps, RUN_RECORD, id, "first")]);
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
    if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `run ${id}: ${read.detail}`);
    if (read.outcome === "missing") {
      const summary = await this.index.summary(tenant, id);
      return summary ? { view: compactedView(summary), counted: summary.counted === true } : undefined;
    }
    const run = read.snapshot.context?.run;
    if (!run) return undefined;
    const input = first.outcome === "found" ? recordFacts(first.record).find((f) => f.t === "input")?.value : undefined;
    return { view: view(run, input ?? {}), counted: run.counted === true };
  }

  /**
   * A page of a tenant's runs from the runs index (uncounted runs, then live counted, then ended),
   * `limit` entries from `cursor` on, each shown as `get` shows it. With `status`, only the parts that
   * can hold it are read and a page may hold fewer. A run that ends while pages are read may be listed
   * twice.
   */
  async list(tenant: string, options: ListRunsRequest = {}): Promise<{ runs: RunView[]; next_cursor: string | null }> {
    const limit = Math.min(options.limit ?? 50, 500);
    const page = await this.index.page(tenant, options.cursor, limit, partsHolding(options.status));
    const read = await Promise.all(page.entries.map(async (e) => ({ part: e.part, run: await this.read(tenant, e.run) })));
    const listed = new Set<string>();
    const runs = read
      // Each run in one part: a run a person admitted first is counted later (its `.c` entry lists
      // it, not its member key or its end); a counted run stored before had a `.c` entry too.
      .filter((r) => r.run !== undefined && (r.part === "c") === !r.run.counted)
      .map((r) => r.run!.view)
      // A run that just ended is in the live part until its tenant hears of it, and in the ended
      // part already: a page lists it once (pages apart, it may still come twice; never missed).
      .filter((r) => !listed.has(r.id) && listed.add(r.id) !== undefined)
      .filter((r) => !options.status || r.status === options.status);
    return { runs, next_cursor: page.next };
  }

  /**
   * A page of a run's progress events after the event `after` (an id as published; none: from
   * its first), read back from the run's journal (see readRunEvents): what a watcher that
   * missed some of them live reads to catch up, with the same ids. At most `limit` (default
   * 500) events and about 256 KiB.
   */
  async events(tenant: string, id: string, options: { after?: string; limit?: number } = {}): Promise<RunEventsResult> {
    if (tenantOfRun(id) !== tenant) return { outcome: "run_not_found" };
    const after = options.after === undefined ? undefined : parseEventId(options.after);
    if (options.after !== undefined && !after) throw new RunwayFault("invalid_event_id", `not an event id: ${options.after}`);
    const read = await readRunEvents(this.deps.nc, this.deps.partitions, id, { ...(after ? { after } : {}), limit: options.limit ?? 500 });
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
    if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `run ${id}: ${read.detail}`);
    if (read.empty) {
      // Nothing stored from `after` on: a run that is not there, or whose record was compacted.
      const run = await this.get(tenant, id);
      if (!run) return { outcome: "run_not_found" };
      if (run.compacted) return { outcome: "events", events: [], last: read.last, more: false, compacted: true };
    }
    return { outcome: "events", events: read.events, last: read.last, more: read.more };
  }
}
