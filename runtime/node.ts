import { randomUUID } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { ActorHost, type ActorHostConfig, type HostDecorators } from "./actor/host.js";
import type { ActorDefinition } from "./actor/define.js";
import { MailboxClient } from "./actor/mailbox.js";
import { systemClock, type Clock } from "./clock.js";
import { Lifecycle, type Stage } from "./lifecycle.js";
import { createLogger, type Logger } from "./log.js";
import { connectNats, type ConnectionConfig } from "./nats/connection.js";
import { Membership } from "./partitions/membership.js";
import { PartitionOwnership } from "./partitions/ownership.js";
import { ensureTopology, type TopologyConfig, DEFAULT_TOPOLOGY } from "./topology.js";

/** A node's liveness lease when its config sets none: its partitions are another's this long after it stops renewing. */
export const DEFAULT_LEASE_TTL_MS = 10_000;

export interface NodeConfig {
  connection: ConnectionConfig;
  /** Unique among live nodes and stable across restarts (a restart reclaims its partitions at once). */
  name: string;
  actors: readonly ActorDefinition[];
  topology?: Partial<TopologyConfig>;
  /** Liveness lease; a dead node's partitions move after about this long. */
  leaseTtlMs?: number;
  reconcileMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Wrappers of the host's ports (tests inject faults through them); production passes none. */
  decorate?: HostDecorators;
  /** Deliveries after which a command that faults its actor is dead-lettered (see ActorHostConfig.maxDeliveries). */
  maxDeliveries?: number;
  /** In-process receivers of `runway.local` effects (see ActorHostConfig.local). */
  local?: ActorHostConfig["local"];
  /** Recovery when this node starts serving a partition (see ActorHostConfig.onServe). */
  onServe?: ActorHostConfig["onServe"];
  /** Stages the domain adds between the host and membership (e.g. executors). */
  stages?: (node: () => RunwayNode) => Stage[];
  /**
   * Stages the domain adds after ownership (e.g. the API): they start while the first claims
   * are made and recovered, and stop first, before the partitions are handed back.
   */
  serving?: (node: () => RunwayNode) => Stage[];
}

export interface RunwayNode {
  readonly name: string;
  readonly incarnation: string;
  readonly nc: NatsConnection;
  readonly host: ActorHost;
  readonly membership: Membership;
  readonly ownership: PartitionOwnership;
  readonly mailbox: MailboxClient;
  readonly topology: TopologyConfig;
  /** Hands partitions back after in-flight commands finish, leaves the cluster, closes the connection. */
  stop(): Promise<void>;
}

/**
 * Starts a node through ordered stages — connect, topology, host, the domain's stages,
 * membership, ownership, the domain's serving stages — and stops it in reverse: the serving
 * stages first, then ownership drains (partitions handed back once in-flight commands finish),
 * the liveness record goes next, the connection last.
 */
export async function startNode(config: NodeConfig): Promise<RunwayNode> {
  const logger = config.logger ?? createLogger(`node:${config.name}`);
  const node: NodeBuild = {
    config,
    clock: config.clock ?? systemClock,
    logger,
    topology: { ...DEFAULT_TOPOLOGY, ...config.topology },
    incarnation: randomUUID(),
    leaseTtlMs: config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS,
    parts: {},
  };
  const lifecycle = new Lifecycle(logger);
  lifecycle.add(connectStage(node));
  lifecycle.add({ name: "topology", start: () => retryWhileElecting(() => ensureTopology(node.parts.nc!, node.topology), logger) });
  lifecycle.add(hostStage(node));
  const self = nodeView(node, lifecycle);
  for (const stage of config.stages?.(() => self) ?? []) lifecycle.add(stage);
  lifecycle.add(membershipStage(node));
  lifecycle.add(ownershipStage(node));
  for (const stage of config.serving?.(() => self) ?? []) lifecycle.add(stage);

  await lifecycle.start();
  return self;
}

/** What a starting node's stages share: its settings, and its parts once their stage started. */
interface NodeBuild {
  config: NodeConfig;
  clock: Clock;
  logger: Logger;
  topology: TopologyConfig;
  incarnation: string;
  leaseTtlMs: number;
  parts: Partial<{ nc: NatsConnection; host: ActorHost; membership: Membership; ownership: PartitionOwnership }>;
}

function connectStage({ config, parts }: NodeBuild): Stage {
  return {
    name: "connect",
    start: async () => {
      parts.nc = await connectNats({ ...config.connection, name: config.name });
    },
    stop: async () => {
      await parts.nc?.drain().catch(() => parts.nc?.close());
    },
  };
}

function hostStage({ config, parts, topology, clock, logger, leaseTtlMs }: NodeBuild): Stage {
  return {
    name: "host",
    start: () => {
      parts.host = new ActorHost({
        nc: parts.nc!,
        partitions: topology.partitions,
        actors: config.actors,
        clock,
        logger,
        pinTimeoutMs: leaseTtlMs,
        node: config.name,
        ...(config.decorate ? { decorate: config.decorate } : {}),
        ...(config.maxDeliveries !== undefined ? { maxDeliveries: config.maxDeliveries } : {}),
        ...(config.local ? { local: config.local } : {}),
        ...(config.onServe ? { onServe: config.onServe } : {}),
        onFenced: () => parts.ownership?.poke(),
      });
    },
    stop: () => parts.host?.stop(),
  };
}

/** The node as the domain's stages see it; its parts exist once the earlier stages started. */
function nodeView({ config, parts, topology, incarnation }: NodeBuild, lifecycle: Lifecycle): RunwayNode {
  let mailbox: MailboxClient | undefined;
  return {
    name: config.name,
    incarnation,
    topology,
    get nc() {
      return parts.nc!;
    },
    get host() {
      return parts.host!;
    },
    get membership() {
      return parts.membership!;
    },
    get ownership() {
      return parts.ownership!;
    },
    get mailbox() {
      return (mailbox ??= new MailboxClient(parts.nc!, topology.partitions, (a) => parts.host!.keyOf(a)));
    },
    stop: () => lifecycle.stop(),
  };
}

function membershipStage({ config, parts, incarnation, leaseTtlMs, clock, logger }: NodeBuild): Stage {
  return {
    name: "membership",
    start: async () => {
      parts.membership = new Membership({ nc: parts.nc!, node: config.name, incarnation, ttlMs: leaseTtlMs, clock, logger });
      await parts.membership.start();
    },
    stop: () => parts.membership?.stop(),
  };
}

function ownershipStage({ config, parts, topology, incarnation, leaseTtlMs, clock, logger }: NodeBuild): Stage {
  return {
    name: "ownership",
    start: () => {
      parts.ownership = new PartitionOwnership({
        nc: parts.nc!,
        host: parts.host!,
        membership: parts.membership!,
        authority: { node: config.name, incarnation },
        partitions: topology.partitions,
        clock,
        logger,
        reconcileMs: config.reconcileMs ?? Math.max(250, Math.floor(leaseTtlMs / 4)),
        replicated: topology.replicas > 1,
      });
      parts.ownership.start();
    },
    stop: () => parts.ownership?.drain(),
  };
}

/**
 * A node that starts while its cluster elects leaders or re-adds a peer sees transient
 * JetStream errors (no suitable peers, timeouts, no responders); it waits them out for a while
 * instead of failing its start.
 */
async function retryWhileElecting<T>(op: () => Promise<T>, logger: Logger, deadlineMs = 30_000): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await op();
    } catch (err) {
      const text = String((err as Error).message ?? err);
      if (Date.now() > deadline || !/peer|placement|not enabled|timeout|no responders|leader|unavailable/i.test(text)) throw err;
      logger.warn("JetStream not ready; retrying", { error: text });
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
