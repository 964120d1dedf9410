import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV, type KvWatchEntry } from "@nats-io/kv";
import { z } from "zod";
import type { Clock } from "../clock.js";
import type { Logger } from "../log.js";
import { isRemovalOperation, publish } from "../nats/jetstream.js";
import { kvSubject, NODES_BUCKET } from "../topology.js";
import { PLACEMENT_VERSION, type PlacementVersion } from "./placement.js";
import { sentHeaders } from "../nats/headers.js";

export const NodeRecordSchema = z.object({
  node: z.string(),
  incarnation: z.string(),
  pid: z.number(),
  startedAt: z.number(),
  renewedAt: z.number(),
  ttlMs: z.number(),
  /** The placement function this node can use (see placement.ts); absent: 1, a node from before it changed. */
  placement: z.number().int().positive().optional(),
});
export type NodeRecord = z.infer<typeof NodeRecordSchema>;

export interface MembershipConfig {
  nc: NatsConnection;
  node: string;
  incarnation: string;
  /** Lease of this node's liveness record; the server deletes it this long after the last renewal. */
  ttlMs: number;
  clock: Clock;
  logger: Logger;
}

/**
 * Node liveness as a KV record per node with a per-message TTL: the node renews it every
 * ttl/3; if the node dies or is paused, the server itself removes the record when the TTL
 * runs out and every watcher sees a delete marker. One server clock decides expiry, so node
 * clocks may drift without two nodes disagreeing on who is alive. The partition leases of a
 * node are valid while its liveness record is; renewing one record renews them all.
 */
export class Membership {
  private kv: KV | undefined;
  private revision = 0;
  private readonly live = new Map<string, NodeRecord>();
  private renewTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private watching: Promise<void> | undefined;
  private stopWatch: (() => void) | undefined;
  private readonly listeners = new Set<() => void>();
  private startedAt = 0;
  /** Monotonic ms until which no other node can take this node's partitions (see `holdsUntil`). */
  private heldUntil = 0;
  private lapseCount = 0;
  private readonly renewalListeners = new Set<() => void>();

  constructor(private readonly config: MembershipConfig) {}

  get ttlSeconds(): number {
    return Math.max(1, Math.ceil(this.config.ttlMs / 1000));
  }

  liveNodes(): string[] {
    return [...this.live.keys()].sort();
  }

  isLive(node: string): boolean {
    return this.live.has(node);
  }

  /** The placement version every live node can use (the lowest announced): all of them place partitions alike. */
  placementVersion(): PlacementVersion {
    let version: PlacementVersion = PLACEMENT_VERSION;
    for (const record of this.live.values()) if ((record.placement ?? 1) < version) version = 1;
    return version;
  }

  /**
   * Monotonic ms (the clock's) until which this node's partitions cannot have been taken: its last
   * stored renewal, counted from before it was sent, plus the record's TTL (the server removes the
   * record no sooner, and no node claims a partition from a live owner). 0 before the first renewal.
   */
  holdsUntil(): number {
    return this.heldUntil;
  }

  /** How many times this node's record lapsed (found gone or taken at a renewal): what was held before a lapse may be another's now. */
  get lapses(): number {
    return this.lapseCount;
  }

  /** Called after each renewal settles (stored, lapsed or failed). */
  onRenewal(listener: () => void): () => void {
    this.renewalListeners.add(listener);
    return () => this.renewalListeners.delete(listener);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async start(): Promise<void> {
    this.kv = await new Kvm(this.config.nc).open(NODES_BUCKET);
    this.startedAt = this.config.clock.now();
    await this.renew(true);
    const watcher = await this.kv.watch({ key: "node.>" });
    this.stopWatch = () => watcher.stop();
    let ready: () => void = () => undefined;
    const initial = new Promise<void>((r) => (ready = r));
    this.watching = (async () => {
      for await (const entry of watcher) {
        this.apply(entry);
        if (entry.delta === 0) ready();
      }
    })();
    // An empty bucket yields no entry with delta 0; our own record guarantees one.
    await initial;
    this.renewTimer = setInterval(() => void this.renew(false), Math.max(200, Math.floor(this.config.ttlMs / 3)));
  }

  private apply(entry: KvWatchEntry): void {
    const name = entry.key.slice("node.".length);
    const before = this.live.get(name);
    if (isRemovalOperation(entry.operation) || entry.length === 0) {
      this.live.delete(name);
    } else {
      try {
        this.live.set(name, NodeRecordSchema.parse(entry.json()));
      } catch {
        this.config.logger.warn("unreadable node record", { key: entry.key });
      }
    }
    const after = this.live.get(name);
    // A node joining or leaving, or restarted under its name by another version (placement).
    if ((before === undefined) !== (after === undefined) || before?.placement !== after?.placement) for (const l of this.listeners) l();
  }

  private async renew(first: boolean): Promise<void> {
    try {
      await this.renewOnce(first);
    } finally {
      for (const l of this.renewalListeners) l();
    }
  }

  private async renewOnce(first: boolean): Promise<void> {
    if (this.stopped) return;
    const { node, incarnation, clock, nc } = this.config;
    const record: NodeRecord = {
      node,
      incarnation,
      pid: process.pid,
      startedAt: this.startedAt,
      renewedAt: clock.now(),
      ttlMs: this.config.ttlMs,
      placement: PLACEMENT_VERSION,
    };
    const h = sentHeaders();
    const data = new TextEncoder().encode(JSON.stringify(record));
    const sentAt = clock.monotonic();
    // The first write takes the name over unconditionally (a restart of the same node); later
    // renewals are revision-checked so a lapse is noticed and logged.
    const result = await publish(nc, kvSubject(NODES_BUCKET, `node.${node}`), data, {
      headers: h,
      ttl: `${this.ttlSeconds}s`,
      ...(first ? {} : { expectLastSubjectSequence: this.revision }),
    });
    if (result.outcome === "stored") {
      this.revision = result.seq;
      this.heldUntil = Math.max(this.heldUntil, sentAt + this.ttlSeconds * 1000);
      return;
    }
    if (result.outcome === "conflict") {
      this.config.logger.warn("node lease lapsed or was taken over; renewing", { node });
      this.revision = 0;
      this.lapseCount++;
      this.heldUntil = 0;
      await this.renewOnce(true);
      return;
    }
    this.config.logger.warn("node lease renewal failed", { node, outcome: result.outcome });
  }

  /** Deletes this node's liveness record so that others take its partitions at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.stopWatch?.();
    await this.watching?.catch(() => undefined);
    await this.kv?.delete(`node.${this.config.node}`).catch(() => undefined);
  }
}
