import type { NatsConnection } from "@nats-io/transport-node";
import type { Clock } from "../clock.js";
import type { Logger } from "../log.js";
import { PartitionLog, type Authority, type FenceRecord } from "../store/partition-log.js";
import type { ActorHost } from "../actor/host.js";
import type { Membership } from "./membership.js";
import { preferredOwner } from "./placement.js";

export interface OwnershipConfig {
  nc: NatsConnection;
  host: ActorHost;
  membership: Membership;
  authority: Authority;
  partitions: number;
  clock: Clock;
  logger: Logger;
  /** How often ownership is reconciled even when membership does not change. */
  reconcileMs: number;
  /** The partitions' streams have several replicas (their chains of writes are linked by sequence: `publishChain`). */
  replicated?: boolean;
}

/**
 * Keeps this node's owned partitions equal to what placement says. Claim a partition placed here
 * when its fence names no owner, this node (a restart: the new epoch fences the old incarnation) or
 * a node whose liveness lease expired, never a live one; release one placed elsewhere after its
 * in-flight commands finish; drop one whose fence moved on (this node was paused past its lease).
 */
export class PartitionOwnership {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private unsubscribe: (() => void) | undefined;
  readonly events: { at: number; partition: number; change: "claimed" | "released" | "lost"; epoch: number }[] = [];

  constructor(private readonly config: OwnershipConfig) {}

  start(): void {
    this.unsubscribe = this.config.membership.onChange(() => this.poke());
    this.timer = setInterval(() => this.poke(), this.config.reconcileMs);
    this.poke();
  }

  /** Runs a reconcile pass now (or right after the one in progress). */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.reconcile();
        } catch (err) {
          this.config.logger.error("ownership reconcile failed", { error: String(err) });
        }
      } while (this.again && !this.stopped);
    })().finally(() => (this.running = undefined));
  }

  /** Resolves after a full pass that started after this call. */
  async settle(): Promise<void> {
    await this.running;
    this.poke();
    await this.running;
  }

  private async reconcile(): Promise<void> {
    const { host, membership, authority, partitions } = this.config;
    const live = membership.liveNodes();
    if (!live.includes(authority.node)) live.push(authority.node);
    const version = membership.placementVersion();
    const work: Promise<void>[] = [];
    for (let p = 0; p < partitions; p++) {
      const preferred = preferredOwner(p, live, version);
      if (host.owns(p)) {
        work.push(this.keepOrLetGo(p, preferred));
      } else if (preferred === authority.node) {
        work.push(this.tryClaim(p));
      }
    }
    await Promise.all(work);
  }

  private async keepOrLetGo(partition: number, preferred: string | undefined): Promise<void> {
    const { host, authority, clock, logger } = this.config;
    const log = host.logOf(partition);
    if (!log) return;
    const state = await log.verify();
    if (state === "fenced") {
      await host.release(partition);
      this.record(partition, "lost", log.epoch);
      logger.warn("partition lost to another owner", { partition, epoch: log.epoch });
      return;
    }
    if (preferred !== undefined && preferred !== authority.node && this.config.membership.isLive(preferred)) {
      await host.release(partition);
      await log.release(clock.now());
      this.record(partition, "released", log.epoch);
      logger.info("partition handed off", { partition, to: preferred });
    }
  }

  private async tryClaim(partition: number): Promise<void> {
    const { nc, host, authority, membership, clock, logger } = this.config;
    const mayTake = (fence: FenceRecord | undefined) => !fence || fence.owner === null || fence.owner === authority.node || !membership.isLive(fence.owner);
    const claimed = await PartitionLog.claim(nc, partition, authority, mayTake, clock.now(), { replicated: this.config.replicated ?? false });
    if (claimed.outcome !== "claimed") return;
    try {
      await host.serve(claimed.log);
      this.record(partition, "claimed", claimed.log.epoch);
      logger.info("partition claimed", { partition, epoch: claimed.log.epoch });
    } catch (err) {
      logger.error("could not serve claimed partition", { partition, error: String(err) });
      await host.release(partition);
    }
  }

  private record(partition: number, change: "claimed" | "released" | "lost", epoch: number): void {
    this.events.push({ at: this.config.clock.now(), partition, change, epoch });
    if (this.events.length > 1_000) this.events.splice(0, this.events.length - 1_000);
  }

  /** Stops reconciling, then hands every owned partition back (after in-flight commands finish). */
  async drain(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    await this.running;
    const { host, clock } = this.config;
    await Promise.all(
      host.ownedPartitions().map(async (p) => {
        const log = await host.release(p);
        await log?.release(clock.now());
      }),
    );
  }
}
