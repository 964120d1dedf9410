import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { runSummary, type RunContext } from "../machines/index.js";
import { RunwayFault, type Effect } from "../runtime/index.js";

/**
 * The runs index (stream `RUNWAY_RUNS`): per run, `rw.runs.<tenant>.<run>.c` (created: a small
 * summary) and, once it ended, `rw.runs.<tenant>.<run>.e` (its final summary). One message per
 * subject. `runs.list` pages through a tenant's `.c` subjects in stream order — the order runs
 * were created, oldest first — with a cursor (the stream sequence to go on from), so a page
 * costs its own size whatever the tenant or the cluster stored. The final summary is what is
 * left of a run once its record is compacted (the ended-run retention): `runs.get` falls back
 * to it.
 *
 * Both are `runway.publish` effects of the run actor's own transitions (`run-actor.ts`): stored
 * in its outbox, published after its record, again after a crash, deduplicated by id.
 */
export const RUNS_STREAM = "RUNWAY_RUNS";

export const createdSubject = (tenant: string, run: string): string => `rw.runs.${tenant}.${run}.c`;
export const endedSubject = (tenant: string, run: string): string => `rw.runs.${tenant}.${run}.e`;

/** A run as the index keeps it: what it was created as, or how it ended. */
export type RunSummaryEntry = ReturnType<typeof runSummary> & {
  lane: string;
  project: string | null;
  error: { code: string; message: string } | null;
  result_truncated: boolean;
};

export function summaryOf(run: RunContext): RunSummaryEntry {
  return {
    ...runSummary(run),
    lane: run.lane,
    project: run.project ?? null,
    error: run.error ? { code: run.error.code, message: run.error.message } : null,
    result_truncated: run.result_truncated,
  };
}

export const runCreatedEffect = (run: RunContext): Effect => ({ type: "runway.publish", subject: createdSubject(run.tenant, run.id), data: summaryOf(run) });
export const runEndedEffect = (run: RunContext): Effect => ({ type: "runway.publish", subject: endedSubject(run.tenant, run.id), data: summaryOf(run) });

export function runsStreamConfig(replicas: number) {
  return {
    name: RUNS_STREAM,
    description: "Runway runs index: rw.runs.<tenant>.<run>.c (created) and .e (final summary); runs.list pages through it",
    subjects: ["rw.runs.>"],
    retention: "limits" as const,
    storage: "file" as const,
    num_replicas: replicas,
    max_msgs_per_subject: 1,
    allow_direct: true,
    duplicate_window: 120_000_000_000,
  };
}

/** A direct get that found nothing to return (404): an answer, not a fault. */
const notFound = (err: unknown): boolean => (err as { code?: unknown }).code === 404 || /message not found|no message found/i.test(String(err));

export interface IndexPage {
  /** Run ids in creation order. */
  runs: string[];
  /** Where the next page starts (a stream sequence), or null when this page reached the end. */
  next: number | null;
}

/** Reads the index. Every read goes to a direct-get responder (any replica): a page may lag a write by a moment. */
export class RunIndex {
  private jsm: JetStreamManager | undefined;

  constructor(private readonly nc: NatsConnection) {}

  private async manager(): Promise<JetStreamManager> {
    this.jsm ??= await jetstreamManager(this.nc, { timeout: 5_000 });
    return this.jsm;
  }

  /** Up to `limit` of `tenant`'s runs created at or after stream sequence `from`. */
  async page(tenant: string, from: number, limit: number): Promise<IndexPage> {
    const jsm = await this.manager();
    const runs: string[] = [];
    let last = from - 1;
    let pending = 0;
    try {
      const batch = await jsm.direct.getBatch(RUNS_STREAM, { seq: from, next_by_subj: `rw.runs.${tenant}.*.c`, batch: limit } as never);
      for await (const m of batch) {
        runs.push(m.subject.split(".")[3]!);
        last = m.seq;
        pending = (m as unknown as { pending?: number }).pending ?? 0;
      }
    } catch (err) {
      // No message at or after `from` for the tenant: the end of the index.
      if (notFound(err)) return { runs, next: null };
      throw new RunwayFault("store_unavailable", `runs index: ${String(err)}`, { kind: "retryable" });
    }
    return { runs, next: pending > 0 ? last + 1 : null };
  }

  /** The final summary of an ended run whose record was compacted, if the index has one. */
  async summary(tenant: string, run: string): Promise<RunSummaryEntry | undefined> {
    const jsm = await this.manager();
    try {
      const m = await jsm.direct.getMessage(RUNS_STREAM, { last_by_subj: endedSubject(tenant, run) });
      return m ? (m.json() as RunSummaryEntry) : undefined;
    } catch (err) {
      if (notFound(err)) return undefined;
      throw new RunwayFault("store_unavailable", `runs index: ${String(err)}`, { kind: "retryable" });
    }
  }
}
