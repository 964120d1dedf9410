import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { jetstreamManager, type ConsumerMessages, type JetStreamManager } from "@nats-io/jetstream";
import { systemClock, type Clock } from "../clock.js";
import { RunwayFault } from "../errors.js";
import { silentLogger, type Logger } from "../log.js";
import { partitionOf } from "../partitions/hash.js";
import type { ActorLog, PartitionLog } from "../store/partition-log.js";
import type { ReadOutcome } from "../nats/jetstream.js";
import { mailboxSubject } from "../topology.js";
import type { ActorAddress, ActorDefinition, ActorTypes } from "./define.js";
import { readActor, type ActorRead, type RecordFormat } from "./read.js";
import { ActorCell } from "./cell.js";
import type { CellEnvironment, Delivery, HostStats } from "./delivery.js";
import { asDeadLetterReason, DeadLetterBox, DeadLetterReason } from "./dead-letters.js";
import { LiveEvents } from "./live-events.js";
import { ActorKeys, OwnKeys } from "./own-keys.js";
import type { OutboxContext } from "./outbox.js";
import { consumeMailbox, type MailboxRouting } from "./mailbox-consumer.js";
import { serveAsks, type AskRouting } from "./asks.js";
import { APPLIED_WINDOW, commandCodec, HEADER_ID } from "./wire.js";
import type { Dispatched, LocalReceiver } from "./protocol.js";

export interface ActorHostConfig {
  nc: NatsConnection;
  partitions: number;
  actors: readonly ActorDefinition[];
  clock?: Clock;
  logger?: Logger;
  /** Ports wrapped before use (tests decorate them to inject faults); production passes none. */
  decorate?: HostDecorators;
  /** This node's name, on the dead letters it files (default `host`). */
  node?: string;
  /**
   * A mailbox command that faults its actor on this many deliveries is dead-lettered
   * (`poison`), as is one that meets an unreadable record this many times (default 5).
   */
  maxDeliveries?: number;
  /** First wait before a kept command is delivered again; doubles per delivery, at most 30 s (default 500 ms). */
  redeliveryBaseMs?: number;
  /** Commands applied in one write when they queue up for one actor. */
  maxBatch?: number;
  /** Idle actors kept in memory per partition before the least recently used are dropped. */
  cacheLimit?: number;
  /** Mailbox messages fetched ahead per partition. */
  prefetch?: number;
  /** How long a pinned mailbox consumer stays pinned to a silent client. */
  pinTimeoutMs?: number;
  /** Called when a partition's writer finds itself fenced, so ownership can be reconciled. */
  onFenced?(partition: number): void;
  /** In-process receivers of `runway.local` effects, by channel (typed by the kinds' channel maps: see `LocalReceivers`). */
  local?: { readonly [channel: string]: LocalReceiver };
  /**
   * Called once a partition is served under a new epoch, before its mailbox is consumed: the
   * place for the domain to recover work that lived only in the previous owner's memory.
   */
  onServe?(partition: number, log: PartitionLog): Promise<void>;
}

/** Wrappers of the host's ports, Orleans' FaultInjectionGrainStorage style: the code under test stays fault-free. */
export interface HostDecorators {
  /** The log a partition's actors read and write their records through. */
  log?(log: ActorLog): ActorLog;
}

export const DEFAULT_MAX_DELIVERIES = 5;

interface OwnedPartition {
  log: PartitionLog;
  /** What the partition's actors write through: `log`, or its decorator. */
  store: ActorLog;
  cells: Map<string, ActorCell>;
  /** The actors' own keys as this owner wrote or read them (see OwnKeys). */
  keys: OwnKeys;
  /** What every cell of a kind in this partition shares (one object, not one per cached actor). */
  envs: Map<string, CellEnvironment>;
  messages?: ConsumerMessages;
  consuming?: Promise<void>;
  /** The partition's direct requests (asks.ts), answered while it is served with its mailbox. */
  asks?: Subscription;
  stopping: boolean;
}

/**
 * The generic actor host: serves the partitions this node owns. For each one it consumes the
 * partition's mailbox (a durable consumer only the owner reads) and runs one serial lane per
 * actor key, all lanes of a partition writing through that partition's fenced log.
 */
export class ActorHost {
  readonly partitions: number;
  readonly stats: HostStats = {
    transitions: 0,
    writes: 0,
    duplicates: 0,
    refused: 0,
    invalid: 0,
    terminated: 0,
    stale: 0,
    fenced: 0,
    deliveredInMemory: 0,
    asked: 0,
  };
  private readonly definitions = new Map<string, ActorDefinition>();
  private readonly owned = new Map<number, OwnedPartition>();
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly outbox: OutboxContext;
  /** Live progress events of this node's actors (see LiveEvents). */
  readonly events: LiveEvents;
  /** Where commands and effects that cannot be applied or published go, counted (see DeadLetterBox). */
  readonly deadLetters: DeadLetterBox;
  private jsm: JetStreamManager | undefined;
  /** The keys actors keep beside their records: written through the fenced logs, remembered per partition. */
  private readonly keys: ActorKeys;
  /** What a partition's mailbox consumer needs from this host (see mailbox-consumer.ts). */
  private readonly routing: MailboxRouting;
  /** What answering a partition's direct requests needs from this host (see asks.ts). */
  private readonly asking: AskRouting;

  constructor(private readonly config: ActorHostConfig) {
    this.partitions = config.partitions;
    this.clock = config.clock ?? systemClock;
    this.logger = config.logger ?? silentLogger;
    for (const def of config.actors) {
      if (this.definitions.has(def.kind)) throw new RunwayFault("duplicate_kind", `actor kind ${def.kind} defined twice`);
      this.definitions.set(def.kind, def);
    }
    this.keys = new ActorKeys({
      nc: config.nc,
      clock: this.clock,
      logger: this.logger,
      partitionOf: (a) => this.partitionOf(a),
      served: () => this.owned.values(),
      servedAt: (p) => this.owned.get(p),
    });
    this.events = new LiveEvents(config.nc, this.logger);
    this.deadLetters = new DeadLetterBox({ nc: config.nc, node: config.node ?? "host", now: () => this.clock.now(), logger: this.logger });
    this.outbox = {
      nc: config.nc,
      partitions: config.partitions,
      keyOf: (a) => this.keyOf(a),
      now: () => this.clock.now(),
      events: this.events,
      deadLetters: this.deadLetters,
      store: (self, effect) => this.keys.store(self, effect),
      storeOwn: (self, effects) => this.keys.storeOwn(self, effects),
      deliver: { mayTake: (self, to) => this.takesInMemory(self, to), deliver: (to, event, id) => this.deliverInMemory(to, event, id) },
    };
    this.routing = {
      nc: config.nc,
      logger: this.logger,
      stats: this.stats,
      deadLetters: this.deadLetters,
      manager: () => this.manager(),
      hasKind: (kind) => this.definitions.has(kind),
      partitionOf: (address) => this.partitionOf(address),
      letterFields: (partition, address, reason, detail) => this.letterFields(partition, address, reason, detail),
      ...(config.pinTimeoutMs !== undefined ? { pinTimeoutMs: config.pinTimeoutMs } : {}),
      ...(config.prefetch !== undefined ? { prefetch: config.prefetch } : {}),
      ...(config.redeliveryBaseMs !== undefined ? { redeliveryBaseMs: config.redeliveryBaseMs } : {}),
    };
    this.asking = {
      nc: config.nc,
      logger: this.logger,
      stats: this.stats,
      hasKind: (kind) => this.definitions.has(kind),
      partitionOf: (address) => this.partitionOf(address),
      dispatch: (address, event, id) => this.dispatch(address, event, id),
    };
  }

  /** Reads of actors' own keys answered from memory and from the server, summed over the partitions served now. */
  ownKeyReads(): { hits: number; misses: number } {
    return this.keys.reads();
  }

  /**
   * Reads actor `id` of `format`'s kind (its definition, or its record format) straight from its
   * partition's bucket: no actor is woken, and the partition need not be served here. The record
   * is decoded and brought to the kind's current format by its migration table (see `readActor`).
   */
  read<T extends ActorTypes>(format: RecordFormat<T>, id: string, which: "last" | "first" = "last"): Promise<ActorRead<T["state"]>> {
    return readActor({ nc: this.config.nc, partitions: this.partitions }, format, id, which);
  }

  /** The last value of a key `actor` keeps beside its record (see ActorKeys.read). */
  readOwn(actor: ActorAddress, key: string): Promise<ReadOutcome> {
    return this.keys.read(actor, key);
  }

  keyOf(address: ActorAddress): string {
    return this.definitions.get(address.kind)?.key?.(address.id) ?? address.id;
  }

  partitionOf(address: ActorAddress): number {
    return partitionOf(this.keyOf(address), this.partitions);
  }

  ownedPartitions(): number[] {
    return [...this.owned.keys()].sort((a, b) => a - b);
  }

  owns(partition: number): boolean {
    return this.owned.has(partition);
  }

  logOf(partition: number): PartitionLog | undefined {
    return this.owned.get(partition)?.log;
  }

  /**
   * Starts serving a partition under `log`'s epoch. With `mailbox`, also takes over its durable
   * consumer — unpinned from any previous owner and reset so that every unacknowledged command is
   * delivered again now rather than after its ack wait — and answers its direct requests.
   */
  async serve(log: PartitionLog, options: { mailbox: boolean } = { mailbox: true }): Promise<void> {
    if (this.owned.has(log.partition)) throw new RunwayFault("already_served", `partition ${log.partition} is already served`);
    const part: OwnedPartition = {
      log,
      store: this.config.decorate?.log?.(log) ?? log,
      cells: new Map(),
      keys: new OwnKeys(),
      envs: new Map(),
      stopping: false,
    };
    this.owned.set(log.partition, part);
    await this.config.onServe?.(log.partition, log);
    if (options.mailbox) {
      await this.startMailbox(part);
      part.asks = serveAsks(this.asking, log.partition);
      // Once serve resolves the server routes the partition's requests here.
      await this.config.nc.flush();
    }
  }

  /** Stops serving a partition: no new commands are taken; in-flight lanes finish (or find themselves fenced). */
  async release(partition: number): Promise<PartitionLog | undefined> {
    const part = this.owned.get(partition);
    if (!part) return undefined;
    part.stopping = true;
    // Drained, not just unsubscribed: a request the server routed here before it saw the
    // unsubscribe is still answered (`mailbox`: the requester stores it for the next owner),
    // where a closed subscription would drop it and leave the requester waiting out its timeout.
    // Not awaited: the drain waits for the server's answer, which a reconnect can hold up, and a
    // request it delivers later finds the partition stopping or gone and is answered the same.
    void part.asks?.drain().catch(() => undefined);
    part.messages?.stop();
    await part.consuming?.catch(() => undefined);
    await Promise.all([...part.cells.values()].map((c) => c.whenIdle()));
    this.owned.delete(partition);
    for (const [key, cell] of part.cells) this.dropCell(part, key, cell);
    return part.log;
  }

  /**
   * Applies a command in this process (the partition must be served here), bypassing the mailbox.
   * `onQueued` is given a function that takes the command back while it still waits in its lane
   * (true: it is settled `kept`, reason `withdrawn`, and will never be applied here; false: it is
   * being applied or already was, and its answer follows).
   */
  dispatch(
    address: ActorAddress,
    event: unknown,
    id: string,
    options: { trusted?: boolean; fresh?: boolean; onQueued?: (withdraw: () => boolean) => void } = {},
  ): Promise<Dispatched<unknown>> {
    const part = this.owned.get(this.partitionOf(address));
    if (!part || part.stopping) return Promise.resolve({ outcome: "not_served" });
    // Methods rather than arrow functions below: under tsx every named closure costs a `__name` call.
    const host = this;
    return new Promise((resolve) => {
      const delivery: Delivery = {
        id,
        event,
        ...(options.trusted ? { trusted: true } : {}),
        ...(options.fresh ? { fresh: true } : {}),
        settle(answer, how, reason, detail) {
          // No mailbox message to file: the letter is the command as the mailbox would have carried it.
          if (how === "dead")
            void host.deadLetters.put({
              ...host.letterFields(part.log.partition, address, reason, detail),
              subject: mailboxSubject(part.log.partition, address.kind, address.id),
              headers: { [HEADER_ID]: id },
              data: encodeCommand(event),
              deliveries: 0,
              command: id,
            });
          resolve(answer ?? { outcome: "kept", reason: reason ?? how });
        },
      };
      const cell = this.cellFor(part, address);
      cell.enqueue(delivery);
      options.onQueued?.(() => {
        if (!cell.withdraw(delivery)) return false;
        delivery.settle(undefined, "keep", "withdrawn");
        return true;
      });
    });
  }

  /**
   * A send between actors of this node goes without the mailbox when the receiver's kind takes
   * it (`inbox: "memory"`), the sender's does not (so no two lanes wait on each other), and the
   * receiver's partition is served here.
   */
  private takesInMemory(self: ActorAddress, to: ActorAddress): boolean {
    if (this.definitions.get(to.kind)?.inbox !== "memory" || this.definitions.get(self.kind)?.inbox === "memory") return false;
    const part = this.owned.get(this.partitionOf(to));
    return part !== undefined && !part.stopping;
  }

  /** The sender's machine built the event: it is not parsed again. */
  private async deliverInMemory(to: ActorAddress, event: unknown, id: string): Promise<"delivered" | "publish"> {
    const answer = await this.dispatch(to, event, id, { trusted: true });
    if (answer.outcome === "not_served" || answer.outcome === "kept") return "publish";
    this.stats.deliveredInMemory++;
    return "delivered";
  }

  /** Releases every partition. */
  async stop(): Promise<void> {
    await Promise.all(this.ownedPartitions().map((p) => this.release(p)));
  }

  private cellFor(part: OwnedPartition, address: ActorAddress): ActorCell {
    const cellKey = `${address.kind}.${address.id}`;
    let cell = part.cells.get(cellKey);
    if (cell) {
      // Map order is insertion order: re-inserting marks it recently used.
      part.cells.delete(cellKey);
      part.cells.set(cellKey, cell);
      return cell;
    }
    cell = new ActorCell(address, cellKey, this.environment(part, address.kind));
    part.cells.set(cellKey, cell);
    const limit = this.config.cacheLimit ?? 10_000;
    if (part.cells.size > limit) {
      for (const [k, c] of part.cells) {
        if (part.cells.size <= limit) break;
        if (!c.busy) this.dropCell(part, k, c);
      }
    }
    return cell;
  }

  private dropCell(part: OwnedPartition, key: string, cell: ActorCell): void {
    part.cells.delete(key);
    try {
      cell.env.definition.onDropped?.(cell.address);
    } catch (err) {
      // A lane's end runs it: a throw there would be an unhandled rejection, which ends the process.
      this.logger.error("onDropped failed", { actor: key, error: String(err) });
    }
  }

  /** The actors held in memory, over the partitions served now (ended runs are not: see `keepInMemory`). */
  actorsInMemory(): number {
    let n = 0;
    for (const part of this.owned.values()) n += part.cells.size;
    return n;
  }

  private environment(part: OwnedPartition, kind: string): CellEnvironment {
    let env = part.envs.get(kind);
    if (env) return env;
    const definition = this.definitions.get(kind)!;
    env = {
      definition,
      log: part.store,
      keys: part.keys,
      outbox: this.outbox,
      clock: this.clock,
      logger: this.logger,
      maxBatch: Math.min(definition.maxBatch ?? this.config.maxBatch ?? APPLIED_WINDOW, APPLIED_WINDOW),
      maxDeliveries: this.config.maxDeliveries ?? DEFAULT_MAX_DELIVERIES,
      stats: this.stats,
      onFenced: () => this.config.onFenced?.(part.log.partition),
      local: (channel, payload, from) => {
        const receiver = this.config.local?.[channel];
        if (!receiver) {
          this.logger.error("no receiver for local effect", { channel, actor: `${from.kind}.${from.id}` });
          return;
        }
        try {
          // The payload as the machine emitted it: its channel's type (see LocalReceivers), not checked again here.
          receiver(payload as never, from);
        } catch (err) {
          this.logger.error("local effect receiver failed", { channel, actor: `${from.kind}.${from.id}`, error: String(err) });
        }
      },
      drop: (key, lane) => {
        const cell = part.cells.get(key);
        // Only the lane that asked, and only while it is still idle: a command may have reached it since.
        if (cell === lane && !cell.busy) this.dropCell(part, key, cell);
      },
    };
    part.envs.set(kind, env);
    return env;
  }

  private enqueue(part: OwnedPartition, address: ActorAddress, delivery: Delivery): void {
    this.cellFor(part, address).enqueue(delivery);
  }

  private async manager(): Promise<JetStreamManager> {
    this.jsm ??= await jetstreamManager(this.config.nc, { timeout: 15_000 });
    return this.jsm;
  }

  private async startMailbox(part: OwnedPartition): Promise<void> {
    const mailbox = await consumeMailbox(this.routing, {
      partition: part.log.partition,
      active: () => !part.stopping && !part.log.fenced,
      enqueue: (address, delivery) => this.enqueue(part, address, delivery),
    });
    part.messages = mailbox.messages;
    part.consuming = mailbox.done;
  }

  private letterFields(partition: number, address: ActorAddress, reason: string | undefined, detail: string | undefined) {
    // The cell settles `dead` with a reason of the closed set; anything else would be a bug here, filed as poison with what it said.
    const known = asDeadLetterReason(reason);
    return {
      reason: known ?? DeadLetterReason.Poison,
      detail: known ? (detail ?? "") : `${reason ?? "no reason"}: ${detail ?? ""}`,
      partition,
      kind: address.kind,
      id: address.id,
    };
  }
}

function encodeCommand(event: unknown): Uint8Array {
  try {
    return commandCodec.encode({ event: event as { type: string } });
  } catch {
    return new Uint8Array();
  }
}
