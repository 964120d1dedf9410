import type { NatsConnection } from "@nats-io/transport-node";
import type { RunContext } from "../machines/index.js";
import { actorRecordCodec, type ActorHost, type Logger, type PartitionLog } from "../runtime/index.js";
import { actorIdsIn } from "./records.js";
import { RUN_KIND } from "./run-actor.js";

/**
 * The streams' duplicate window: an outbox published again within it is dropped by the stream,
 * so a recently ended run's last outbox can be republished without a second delivery.
 */
export const REPUBLISH_WINDOW_MS = 120_000;

/**
 * When this node starts serving a partition, the attempts its runs had leased lived in the
 * memory of whichever process served it before; that process is gone (or fenced). Every live
 * run of the partition gets `run.recover`: its leased and running attempts fail as
 * `worker_lost` and are retried at once. The scan reads each run record once; a run with
 * nothing in flight refuses the command without a write.
 *
 * A run that ended just before its node died may not have published its last outbox (the word
 * to its tenant or its parent), and a command applied in-process leaves no mailbox message to
 * redeliver: nothing would load it again. Loading an actor publishes its stored outbox, so a run
 * ended within the duplicate window is touched too (refused without a write).
 */
export async function recoverPartition(
  deps: {
    nc: NatsConnection;
    host: ActorHost;
    logger: Logger;
    now(): number;
    alive(run: string): { node: string; item?: number; attempt: number; lease_epoch: number }[];
  },
  partition: number,
  log: PartitionLog,
): Promise<number> {
  let recovered = 0;
  await Promise.all(
    (await actorIdsIn(deps.nc, partition, RUN_KIND)).map(async (id) => {
      const read = await log.read(`${RUN_KIND}.${id}`);
      if (read.outcome !== "found") return;
      const decoded = actorRecordCodec.decode(read.message.data);
      if (!decoded.ok) return;
      const snapshot = decoded.value.snapshot as { value?: unknown; context?: { run?: RunContext | null } };
      if (snapshot.value !== "live") {
        const ended = snapshot.context?.run?.lifecycle.ended_at;
        if (decoded.value.outbox.length > 0 && ended != null && deps.now() - ended <= REPUBLISH_WINDOW_MS) {
          await deps.host.dispatch({ kind: RUN_KIND, id }, { type: "run.recover", reason: "partition_claimed" }, `recover/${partition}/${log.epoch}/${id}`);
        }
        return;
      }
      // A node that claims its own partition again (a lease it let lapse) still runs some attempts: those are not lost.
      const answer = await deps.host.dispatch(
        { kind: RUN_KIND, id },
        { type: "run.recover", reason: "partition_claimed", alive: deps.alive(id) },
        `recover/${partition}/${log.epoch}/${id}`,
      );
      if (answer.outcome === "applied") recovered++;
    }),
  );
  if (recovered > 0) deps.logger.info("recovered in-flight attempts", { partition, runs: recovered });
  return recovered;
}
