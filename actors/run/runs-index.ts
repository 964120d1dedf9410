import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { MEMBER_PREFIX, NON_TERMINAL, runSummary, tenantKey, type RunContext, type RunStatus } from "../../machines/index.js";
import { isRemovalOperation, kvSubject, partitionBucket, partitionOf, partitionStream, RunwayFault, type Effect } from "../../runtime/index.js";
import { runOfMemberKey } from "../tenant/index.js";

/**
 * The runs index behind `runs.list`: a tenant's runs in three stream-ordered parts, so a page costs
 * its own size. `c` (`rw.runs.<tenant>.<run>.c`): runs the tenant did not count at start, in creation
 * order; `m`: the tenant's member keys, live counted runs; `e` (`….e`): counted runs' final summaries,
 * in end order, published before the member key goes, so a run may be listed twice but never missed.
 * Entries are outbox effects of the run's own transitions, so a crash republishes them (deduped).
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
  /** Its tenant counted it from its start (listed by its member key while it lived, not by a `.c` entry); absent in entries published before. */
  counted?: true;
};

export function summaryOf(run: RunContext): RunSummaryEntry {
  return {
    ...runSummary(run),
    lane: run.lane,
    project: run.project ?? null,
    error: run.error ? { code: run.error.code, message: run.error.message } : null,
    result_truncated: run.result_truncated,
    ...(run.counted ? { counted: true as const } : {}),
  };
}

export const runCreatedEffect = (run: RunContext): Effect => ({ type: "runway.publish", subject: createdSubject(run.tenant, run.id), data: summaryOf(run) });
export const runEndedEffect = (run: RunContext): Effect => ({ type: "runway.publish", subject: endedSubject(run.tenant, run.id), data: summaryOf(run) });

export function runsStreamConfig(replicas: number) {
  return {
    name: RUNS_STREAM,
    description: "Runway runs index: rw.runs.<tenant>.<run>.c (created, runs their tenant did not count) and .e (final summary); runs.list pages through it",
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

/** Messages one read of the live part asks for at least: most of them may be ended runs' removal markers. */
const LIVE_BATCH = 1_000;

/** The parts of the index, in the order `runs.list` reads them (see above). */
const PARTS = ["c", "m", "e"] as const;
type Part = (typeof PARTS)[number];

/**
 * The parts that can hold a run in `status` (none: every part). A live status is never in the
 * ended part and an ended one never in the live part: a run that ended is in the ended part
 * before it leaves the live one.
 */
export function partsHolding(status: RunStatus | undefined): readonly Part[] {
  return !status ? PARTS : NON_TERMINAL.has(status) ? ["c", "m"] : ["c", "e"];
}

/** Where a page starts: a part and a stream sequence in it. A bare sequence (a cursor given before parts existed) is one of the first part. */
export const CURSOR_PATTERN = /^[cme]?[1-9][0-9]{0,15}$/;

export interface IndexEntry {
  run: string;
  part: Part;
}

export interface IndexPage {
  /** Run ids, the part each came from. */
  entries: IndexEntry[];
  /** Where the next page starts, or null when this page reached the end of the last part. */
  next: string | null;
}

/** Reads the index. Every read goes to a direct-get responder (any replica): a page may lag a write by a moment. */
export class RunIndex {
  private jsm: JetStreamManager | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
  ) {}

  private async manager(): Promise<JetStreamManager> {
    this.jsm ??= await jetstreamManager(this.nc, { timeout: 5_000 });
    return this.jsm;
  }

  /**
   * Up to `limit` of `tenant`'s runs from `cursor` on (none: from the start of the first part),
   * reading only the parts in `parts` (a part the cursor names but `parts` skips: from the next).
   */
  async page(tenant: string, cursor: string | undefined, limit: number, parts: readonly Part[]): Promise<IndexPage> {
    const at = cursor && /^[cme]/.test(cursor) ? { part: cursor[0] as Part, seq: Number(cursor.slice(1)) } : { part: "c" as Part, seq: Number(cursor ?? 1) };
    const entries: IndexEntry[] = [];
    for (let i = PARTS.indexOf(at.part), seq = at.seq; i < PARTS.length; i++, seq = 1) {
      const part = PARTS[i]!;
      if (!parts.includes(part)) continue;
      for (;;) {
        if (entries.length === limit) return { entries, next: `${part}${seq}` };
        const read = await this.read(tenant, part, seq, limit - entries.length);
        entries.push(...read.runs.map((run) => ({ run, part })));
        if (read.next === null) break;
        seq = read.next;
      }
    }
    return { entries, next: null };
  }

  /**
   * Up to `want` runs of one part from stream sequence `seq` on, and where to go on (null: the
   * part has nothing after them). The live part is the member keys of a partition's bucket, where
   * each run ended within the last minute leaves a removal marker that lists none: it is read in
   * batches of at least {@link LIVE_BATCH} messages, so a tenant whose thousands of runs just
   * ended pages through their markers in a few requests, not one per page's worth.
   */
  private async read(tenant: string, part: Part, seq: number, want: number): Promise<{ runs: string[]; next: number | null }> {
    const jsm = await this.manager();
    const p = partitionOf(tenant, this.partitions);
    const [stream, filter] =
      part === "m" ? [partitionStream(p), kvSubject(partitionBucket(p), tenantKey(tenant, `${MEMBER_PREFIX}*`))] : [RUNS_STREAM, `rw.runs.${tenant}.*.${part}`];
    const runs: string[] = [];
    let last = seq - 1;
    let pending = 0;
    /** A run this page has no room for was read: the next page starts at it. */
    let leftAt: number | undefined;
    try {
      const batch = await jsm.direct.getBatch(stream, { seq, next_by_subj: filter, batch: part === "m" ? Math.max(want, LIVE_BATCH) : want } as never);
      for await (const m of batch) {
        pending = (m as unknown as { pending?: number }).pending ?? 0;
        if (leftAt !== undefined) continue;
        const run = part !== "m" ? m.subject.split(".")[3]! : isRemovalOperation(m.header?.get("KV-Operation")) ? undefined : runOfMemberKey(m.subject);
        if (run !== undefined && runs.length === want) leftAt = m.seq;
        else {
          last = m.seq;
          if (run !== undefined) runs.push(run);
        }
      }
    } catch (err) {
      // Nothing at or after `seq`: the end of the part.
      if (notFound(err)) return { runs, next: null };
      throw new RunwayFault("store_unavailable", `runs index: ${String(err)}`, { kind: "retryable" });
    }
    if (leftAt !== undefined) return { runs, next: leftAt };
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
