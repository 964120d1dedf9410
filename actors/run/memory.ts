import type { NatsConnection } from "@nats-io/transport-node";
import { factsOfHeadV1, isHeadV1, RunFacts, type RunContext, type RunFact, type RunMemory } from "../../machines/index.js";
import { readJournal, readJournalTail, RunwayFault, type ActorRecord, type JournalEntry } from "../../runtime/index.js";

/** A run's journal read through {@link RunMemories.recall}: its last record, if it has any. */
export type Recalled = { outcome: "read"; last: ActorRecord | undefined } | { outcome: "unavailable" | "corrupt"; detail: string };

/**
 * What every run's transitions read besides its head: its input and outputs, folded from its
 * journal. Kept in memory for the runs this node decides for (bounded, least recently used first
 * out), filled from each stored transition's facts, and read back from the journal when a run
 * is not here or its head names an output this copy does not hold (the run was decided by
 * another node for a while).
 */
export class RunMemories {
  private readonly runs = new Map<string, RunFacts>();

  constructor(
    private readonly deps: { nc: NatsConnection; partitions: number; kind: string },
    private readonly limit = 20_000,
  ) {}

  /**
   * The memory of `run` as its head requires it (read from the journal when this copy is not
   * complete), with `pending`: facts of the batch being decided, not stored yet.
   */
  async of(run: RunContext, pending: readonly RunFact[] = []): Promise<RunMemory> {
    const held = this.runs.get(run.id);
    const kept = held?.with(pending);
    if (held && kept!.covers(run)) {
      this.touch(run.id, held);
      return kept!;
    }
    const read = await readJournal(this.deps.nc, this.deps.partitions, this.deps.kind, run.id);
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
    if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `run ${run.id} journal at ${read.seq}: ${read.detail}`);
    let facts = factsOf(read.entries);
    let view = facts.with(pending);
    if (!view.covers(run)) {
      // A direct read served by a replica behind the leader (for seconds, under load or after a
      // fault, where re-reading from replicas kept a cancel from its child): the rest from the leader.
      const tail = await readJournalTail(this.deps.nc, this.deps.partitions, this.deps.kind, run.id, (read.entries.at(-1)?.seq ?? 0) + 1);
      if (tail.outcome === "unavailable") throw new RunwayFault("store_unavailable", tail.detail, { kind: "retryable" });
      if (tail.outcome === "corrupt") throw new RunwayFault("corrupt_record", `run ${run.id} journal at ${tail.seq}: ${tail.detail}`);
      facts = factsOf(tail.reset ? tail.entries : [...read.entries, ...tail.entries]);
      view = facts.with(pending);
    }
    if (!view.covers(run))
      throw new RunwayFault("journal_behind", `run ${run.id}: its journal does not hold every output its head names`, { kind: "retryable" });
    this.touch(run.id, facts);
    return view;
  }

  /**
   * Reads `runId`'s journal once for a caller that needs its last record too (recovery, which
   * then loads the run): the facts are kept, so the run's next decision does not read the journal
   * again. A direct read: a replica behind the leader may answer, so the last record may be an
   * older one, and `of` still checks what it holds against the head it is given.
   */
  async recall(runId: string): Promise<Recalled> {
    const read = await readJournal(this.deps.nc, this.deps.partitions, this.deps.kind, runId);
    if (read.outcome === "unavailable") return read;
    if (read.outcome === "corrupt") return { outcome: "corrupt", detail: `journal at ${read.seq}: ${read.detail}` };
    if (read.entries.length > 0 && !this.runs.has(runId)) this.touch(runId, factsOf(read.entries));
    return { outcome: "read", last: read.entries.at(-1)?.record };
  }

  /** A stored transition's facts: a create starts the run's memory; later facts extend a memory held here. */
  stored(runId: string, facts: readonly unknown[]): void {
    let held = this.runs.get(runId);
    if (!held) {
      if ((facts[0] as RunFact | undefined)?.t !== "input") return;
      held = new RunFacts();
      this.touch(runId, held);
    }
    for (const f of facts) held.add(f as RunFact);
  }

  /** Lets `runId`'s memory go (the run left this node's memory: see the run actor's `keepInMemory`). */
  forget(runId: string): void {
    this.runs.delete(runId);
  }

  /** How many runs' memories are held. */
  get size(): number {
    return this.runs.size;
  }

  private touch(runId: string, facts: RunFacts): void {
    this.runs.delete(runId);
    this.runs.set(runId, facts);
    if (this.runs.size > this.limit) this.runs.delete(this.runs.keys().next().value!);
  }
}

function factsOf(entries: readonly JournalEntry[]): RunFacts {
  const facts = new RunFacts();
  for (const { record } of entries) for (const f of recordFacts(record)) facts.add(f);
  return facts;
}

/** The facts one stored run record holds: a head stored before journals holds its input and outputs itself; later records carry them as facts. */
export function recordFacts(record: Pick<ActorRecord, "snapshot" | "journal">): RunFact[] {
  const head = (record.snapshot as { context?: { run?: unknown } } | undefined)?.context?.run;
  const journal = (record.journal ?? []) as RunFact[];
  return head && isHeadV1(head) ? [...factsOfHeadV1(head), ...journal] : journal;
}
