/**
 * What reaches an actor's lane (a command, from the mailbox or from this process), how it is
 * answered, and what the lane is given to work with.
 */
import type { Clock } from "../clock.js";
import type { Logger } from "../log.js";
import type { ActorLog } from "../store/partition-log.js";
import type { OwnKeys } from "./own-keys.js";
import type { DeadLetterReason } from "./dead-letters.js";
import type { ActorAddress, ActorDefinition } from "./define.js";
import type { OutboxContext } from "./outbox.js";
import type { CommandAnswer } from "./wire.js";

/** How a command is settled (see {@link Delivery.settle}). */
export type Settle = "ack" | "term" | "keep" | "dead";

/** One command waiting to be applied, from the mailbox or from an in-process dispatch. */
export interface Delivery {
  /** Idempotency identity of the command (`Rw-Id`). */
  id: string;
  event: unknown;
  /** How many times the mailbox has delivered it, this time included; absent for an in-process dispatch. */
  deliveries?: number;
  /** Built in this process by code that already holds it to the kind's schema (validated once, at its edge): not parsed again. */
  trusted?: boolean;
  /**
   * The caller vouches that the actor has no stored record yet (its id was made up at random
   * for this command): the first try decides on the machine's initial state without reading,
   * and its write names the key's last sequence as 0, so if a record exists after all the write
   * is refused and the command is decided again on what is stored.
   */
  fresh?: boolean;
  /**
   * Settles the command: `ack` (done, answer it), `term` (never deliver again), `dead` (never
   * deliver again, and file a copy in the dead-letter stream: `reason` is a
   * {@link DeadLetterReason}, `detail` says more), or `keep` (leave it unacknowledged: delivered
   * again later, or, `reason` `fenced`, to the partition's next owner).
   */
  settle(answer: CommandAnswer | undefined, how: Settle, reason?: string, detail?: string): void;
}

export interface CellEnvironment {
  definition: ActorDefinition;
  log: ActorLog;
  /** The partition's own keys as its owner wrote them: given, a record and the keys its transition sets are written as one chain. */
  keys?: OwnKeys;
  outbox: OutboxContext;
  clock: Clock;
  logger: Logger;
  maxBatch: number;
  /** A command that faults its actor on this many deliveries is dead-lettered (`poison`); so is one meeting a corrupt record. */
  maxDeliveries: number;
  stats: HostStats;
  onFenced(): void;
  /** Delivers a stored transition's `runway.local` effects in this process. */
  local(channel: string, payload: unknown, from: ActorAddress): void;
  /** Drops the idle lane `lane` of `key` from memory (its kind keeps no actor in its state; see `keepInMemory`). */
  drop(key: string, lane: object): void;
}

export interface HostStats {
  transitions: number;
  writes: number;
  duplicates: number;
  refused: number;
  invalid: number;
  terminated: number;
  stale: number;
  fenced: number;
  /** Sends between this node's actors applied in memory instead of through the mailbox (`inbox: "memory"`). */
  deliveredInMemory: number;
  /** Commands taken as direct requests (`rw.ask.…`, see asks.ts) rather than from the mailbox. */
  asked: number;
}
