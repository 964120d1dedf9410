import type { NatsConnection } from "@nats-io/transport-node";
import { factsOfHeadV1, isHeadV1, RunFacts, type RunContext, type RunFact, type RunMemory } from "../machines/index.js";
import { readJournal, RunwayFault } from "../runtime/index.js";

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
    const view = held?.with(pending);
    if (held && view!.covers(run)) {
      this.touch(run.id, held);
      return view!;
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const read = await readJournal(this.deps.nc, this.deps.partitions, this.deps.kind, run.id);
      if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", read.detail, { kind: "retryable" });
      if (read.outcome === "corrupt") throw new RunwayFault("corrupt_record", `run ${run.id} journal at ${read.seq}: ${read.detail}`);
      const facts = new RunFacts();
      for (const { record } of read.entries) {
        const head = (record.snapshot as { context?: { run?: unknown } } | undefined)?.context?.run;
        // A head stored before journals holds its input and outputs itself; later records carry them as facts.
        if (head && isHeadV1(head)) for (const f of factsOfHeadV1(head)) facts.add(f);
        for (const f of (record.journal ?? []) as RunFact[]) facts.add(f);
      }
      const view = facts.with(pending);
      if (view.covers(run)) {
        this.touch(run.id, facts);
        return view;
      }
      // A direct read served by a replica behind the leader: read again.
      await new Promise((r) => setTimeout(r, 20 * 2 ** attempt));
    }
    throw new RunwayFault("journal_behind", `run ${run.id}: its journal does not hold every output its head names`, { kind: "retryable" });
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

  private touch(runId: string, facts: RunFacts): void {
    this.runs.delete(runId);
    this.runs.set(runId, facts);
    if (this.runs.size > this.limit) this.runs.delete(this.runs.keys().next().value!);
  }
}
