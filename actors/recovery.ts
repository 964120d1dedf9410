import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { actorRecordCodec, type ActorHost, type Logger, type PartitionLog } from "../runtime/index.js";
import { RUN_KIND } from "./run-actor.js";

/**
 * When this node starts serving a partition, the attempts its runs had leased lived in the
 * memory of whichever process served it before; that process is gone (or fenced). Every live
 * run of the partition gets `run.recover`: its leased and running attempts fail as
 * `worker_lost` and are retried at once. The scan reads each run record once; a run with
 * nothing in flight refuses the command without a write.
 */
export async function recoverPartition(deps: { nc: NatsConnection; host: ActorHost; logger: Logger }, partition: number, log: PartitionLog): Promise<number> {
  const kv = await new Kvm(deps.nc).open(log.bucket);
  const keys: string[] = [];
  for await (const key of await kv.keys(`${RUN_KIND}.*`)) keys.push(key);
  let recovered = 0;
  await Promise.all(
    keys.map(async (key) => {
      const read = await log.read(key);
      if (read.outcome !== "found") return;
      const decoded = actorRecordCodec.decode(read.message.data);
      if (!decoded.ok || (decoded.value.snapshot as { value?: unknown }).value !== "live") return;
      const id = key.slice(RUN_KIND.length + 1);
      const answer = await deps.host.dispatch({ kind: RUN_KIND, id }, { type: "run.recover", reason: "partition_claimed" }, `recover/${partition}/${log.epoch}/${id}`);
      if (answer.outcome === "applied") recovered++;
    }),
  );
  if (recovered > 0) deps.logger.info("recovered in-flight attempts", { partition, runs: recovered });
  return recovered;
}
