import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { DEFAULT_ENDED_RETENTION_MS } from "../../machines/index.js";
import { kvSubject, partitionBucket, partitionOf, partitionStream } from "../../runtime/index.js";
import { RUN_KIND } from "./actor.js";
import { RUNS_STREAM } from "./runs-index.js";

const ENDED = "rw.runs.*.*.e";
const BATCH = 500;

/**
 * Compaction of ended runs: past the retention, a run's key (head and journal) is purged and its
 * final summary stays in the runs index (`runs.get` answers it `compacted: true`). A TTL would not do:
 * an expired last write would leave an older head readable. It walks the index's end entries from
 * where it stopped, so a pass costs the runs that became due.
 */
export class EndedRunCompaction {
  private cursor = 0;
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(private readonly deps: { nc: NatsConnection; partitions: number; owns(partition: number): boolean; retentionMs?: number }) {}

  /** Purges the runs due at `at` in the partitions this node serves; answers how many. */
  async pass(at: number): Promise<number> {
    const retention = this.deps.retentionMs ?? DEFAULT_ENDED_RETENTION_MS;
    this.jsm ??= jetstreamManager(this.deps.nc, { timeout: 5_000 });
    const jsm = await this.jsm;
    let purged = 0;
    for (;;) {
      let got = 0;
      let due = true;
      const batch = await jsm.direct.getBatch(RUNS_STREAM, { seq: this.cursor + 1, next_by_subj: ENDED, batch: BATCH }).catch(() => undefined);
      if (!batch) return purged;
      const messages = (async function* () {
        try {
          yield* batch;
        } catch (err) {
          // Nothing at or after the cursor is an empty read, not a fault.
          if (!/no message|not found|404/i.test(String((err as Error).message ?? err))) throw err;
        }
      })();
      for await (const m of messages) {
        got++;
        const ended = (m.json() as { ended_at?: number | null }).ended_at ?? 0;
        if (ended + retention > at) {
          due = false;
          break;
        }
        const run = m.subject.split(".")[3]!;
        const p = partitionOf(run, this.deps.partitions);
        if (this.deps.owns(p)) {
          await jsm.streams.purge(partitionStream(p), { filter: kvSubject(partitionBucket(p), `${RUN_KIND}.${run}`) });
          purged++;
        }
        this.cursor = m.seq;
      }
      if (!due || got < BATCH) return purged;
    }
  }
}
