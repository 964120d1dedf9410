import type { AnyMachineSnapshot, AnyStateMachine } from "xstate";
import { isFault } from "../errors.js";
import type { LogWriteOutcome } from "../store/partition-log.js";
import { decideBatch, type Cached, type Decision, type Lane, type Pass } from "./batch.js";
import { DeadLetterReason } from "./dead-letters.js";
import type { ActorAddress } from "./define.js";
import { snapshotVersion } from "./migrate.js";
import { decodeActor } from "./read.js";
import { NOTHING_TO_WAIT_FOR, publishOutbox, type StoreEffect } from "./outbox.js";
import { isOwnKeyOf } from "./own-keys.js";
import { persistedSnapshot, pureMachine } from "./pure.js";
import type { CellEnvironment, Delivery } from "./delivery.js";
import { actorRecordCodec, APPLIED_WINDOW, type ActorRecord } from "./wire.js";

/** Keeps only this write in its key's history (the stream keeps every message per subject). */
const ROLLUP = { "Nats-Rollup": "sub" };
/** With the partition's sequence fence, a second precondition on the same message: the key holds no record. */
const EXPECT_NO_RECORD = "Nats-Expected-Last-Subject-Sequence";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The first wait before the lane publishes again an outbox that did not go out; it doubles up to the second. */
const REPUBLISH_FIRST_MS = 1_000;
const REPUBLISH_MAX_MS = 5_000;

/**
 * The serial lane of one actor key: load → pure transition → fenced write → outbox → ack.
 * Commands queued while a write is in flight are applied together in the next pass, so a busy
 * actor costs one write per batch rather than one per command.
 */
export class ActorCell implements Lane {
  private queue: Delivery[] = [];
  private running = false;
  private cached: Cached | undefined;
  /** Made only when someone waits for this lane to go idle (a cell is kept for every cached actor). */
  private idle: Promise<void> | undefined;
  private markIdle: (() => void) | undefined;
  /** The revision of this actor's record known to be unreadable: commands meeting it are dead-lettered at once. */
  private corruptAt: number | undefined;
  /** An outbox is still to go out: the lane loads the record again (see `republishLater`). */
  private reload = false;
  private republishTimer: ReturnType<typeof setTimeout> | undefined;
  private republishDelay = 0;

  constructor(
    readonly address: ActorAddress,
    readonly key: string,
    readonly env: CellEnvironment,
  ) {}

  /** Commands a pass left for the next one (see decideBatch): first in line again. */
  requeue(rest: Delivery[]): void {
    this.queue.unshift(...rest);
  }

  /**
   * Takes back a command still waiting in this lane (not yet in a pass): true if it was, and it
   * will never be applied here. A command already being decided or written is not taken back.
   */
  withdraw(delivery: Delivery): boolean {
    const at = this.queue.indexOf(delivery);
    if (at < 0) return false;
    this.queue.splice(at, 1);
    return true;
  }

  get busy(): boolean {
    return this.running;
  }

  enqueue(delivery: Delivery): void {
    this.queue.push(delivery);
    if (!this.running) {
      this.running = true;
      void this.drain();
    }
  }

  /** Resolves when the queue is empty and nothing is in flight. */
  whenIdle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return (this.idle ??= new Promise((r) => (this.markIdle = r)));
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0 || this.reload) {
        if (this.queue.length === 0) {
          await this.republish();
          continue;
        }
        const batch = this.queue.splice(0, this.env.maxBatch);
        try {
          await this.apply(batch);
        } catch (err) {
          // A bug, or a store fault we could not classify. Applied one at a time, the commands
          // that fault alone stay unacknowledged and come back; see `faulted`.
          this.cached = undefined;
          this.env.logger.error("actor batch failed", { actor: this.key, commands: batch.length, error: String((err as Error).stack ?? err) });
          if (this.env.log.fenced) for (const d of batch) d.settle(undefined, "keep", "fenced");
          else if (batch.length > 1) await this.applyEach(batch);
          else this.faulted(batch[0]!, err);
        }
        if (this.env.log.fenced) {
          for (const d of this.queue.splice(0)) d.settle(undefined, "keep", "fenced");
        }
      }
    } finally {
      this.running = false;
      this.markIdle?.();
      this.idle = undefined;
      this.markIdle = undefined;
      const keep = this.env.definition.keepInMemory;
      if (keep && this.cached && !keep(this.cached.snapshot)) this.env.drop(this.key, this);
    }
  }

  private async load(): Promise<
    { outcome: "loaded"; cached: Cached | undefined } | { outcome: "unavailable" } | { outcome: "corrupt"; revision: number; detail: string }
  > {
    const log = this.env.log;
    if (this.cached && this.cached.generation === log.generation) return { outcome: "loaded", cached: this.cached };
    const generation = log.generation;
    // A record of an older snapshot version is migrated by its kind before anything is decided
    // on it; one written by a later version is never decided on here (a fault: kept for a newer node).
    const read = decodeActor(this.env.definition, await log.read(this.key), "throw");
    if (read.outcome === "unavailable") return { outcome: "unavailable" };
    if (read.outcome === "missing") {
      this.cached = undefined;
      return { outcome: "loaded", cached: undefined };
    }
    if (read.outcome === "corrupt") return { outcome: "corrupt", revision: read.revision, detail: read.detail };
    const persisted = read.persisted;
    let snapshot: AnyMachineSnapshot;
    try {
      snapshot = (this.env.definition.machine as AnyStateMachine).resolveState(persisted as never);
    } catch (err) {
      return { outcome: "corrupt", revision: read.revision, detail: `snapshot: ${String(err)}` };
    }
    this.corruptAt = undefined;
    // The writer of this record may have died before publishing its outbox: publish it again
    // (idempotent by entry id) before anything new is decided.
    if (read.record.outbox.length > 0) {
      const ok = await publishOutbox(this.env.outbox, this.address, read.record.outbox, read.revision).all;
      if (!ok) return { outcome: "unavailable" };
    }
    this.cached = { applied: read.record.applied, transitions: read.record.transitions, revision: read.revision, generation, snapshot };
    return { outcome: "loaded", cached: this.cached };
  }

  /** Decides a batch on the stored state and commits it in one fenced write, again on a stale or unavailable store. */
  private async apply(batch: Delivery[]): Promise<void> {
    const pure = pureMachine(this.env.definition.machine as AnyStateMachine);
    for (let attempt = 0; ; attempt++) {
      if (this.env.log.fenced) {
        for (const d of batch) d.settle(undefined, "keep", "fenced");
        return;
      }
      // A first command to an actor its caller made up needs no read (see Delivery.fresh).
      const assumedNew = attempt === 0 && !this.cached && batch[0]!.fresh === true;
      const loaded = assumedNew ? ({ outcome: "loaded", cached: undefined } as const) : await this.load();
      if (loaded.outcome === "unavailable") {
        await sleep(Math.min(25 * 2 ** attempt, 1_000));
        continue;
      }
      if (loaded.outcome === "corrupt") return this.corrupt(batch, loaded.revision, loaded.detail);
      const base = loaded.cached;
      const pass = await decideBatch(this, batch, base, pure);
      if (pass.changed === 0) {
        for (const d of pass.decisions) d.delivery.settle(d.answer, d.how, d.reason, d.detail);
        this.countTerminated(pass.decisions);
        return;
      }
      let record: ActorRecord;
      let encoded: Uint8Array;
      try {
        record = this.recordOf(pass, base);
        // Encoding walks the whole state recursively (msgpack, with the codec's depth check).
        encoded = actorRecordCodec.encode(record);
      } catch (err) {
        // Left unacknowledged, these commands would come back and fail the same way for ever.
        this.cached = undefined;
        return this.unencodable(batch, err);
      }
      const committed = await this.commit(batch, pass, record, encoded, assumedNew);
      if (committed === "done") return;
      if (committed === "unavailable") await sleep(Math.min(25 * 2 ** attempt, 1_000));
    }
  }

  /** The record a pass that changed something stores. */
  private recordOf(pass: Pass, base: Cached | undefined): ActorRecord {
    const { definition, clock } = this.env;
    return {
      kind: this.address.kind,
      id: this.address.id,
      snapshot: persistedSnapshot(definition.machine as AnyStateMachine, pass.snapshot!),
      applied: pass.applied.slice(-APPLIED_WINDOW),
      outbox: pass.outbox,
      ...(pass.journal.length > 0 ? { journal: pass.journal } : {}),
      transitions: (base?.transitions ?? 0) + pass.changed,
      writer: { node: this.env.log.authority.node, epoch: this.env.log.epoch },
      at: clock.now(),
      version: snapshotVersion(definition),
    };
  }

  /**
   * Writes the record through the partition's fenced log and, once it is stored, publishes its
   * outbox, hands its local effects over and settles the batch. `stale` and `unavailable` ask
   * the caller to decide again on what is stored (after a backoff, for `unavailable`).
   */
  private async commit(
    batch: Delivery[],
    pass: Pass,
    record: ActorRecord,
    encoded: Uint8Array,
    assumedNew: boolean,
  ): Promise<"done" | "stale" | "unavailable"> {
    const { definition } = this.env;
    const generation = this.env.log.generation;
    // A journaled actor keeps every record in its key's history; any other keeps only the latest
    // (and, with a `ttl`, the latest for that long).
    const ttl = definition.history === "journal" ? undefined : definition.ttl?.(pass.snapshot!);
    const kept =
      ttl === undefined
        ? definition.history === "journal"
          ? undefined
          : ROLLUP
        : { "Nats-TTL": `${Math.max(1, Math.ceil(ttl / 1_000))}s`, "Nats-Rollup": "sub" };
    const headers = assumedNew ? { ...kept, [EXPECT_NO_RECORD]: "0" } : kept;
    const own = this.ownKeysOf(pass.outbox);
    const written = own ? await this.writeWithKeys(encoded, headers, own, generation) : await this.env.log.write(this.key, encoded, headers);
    switch (written.outcome) {
      case "written": {
        this.env.stats.writes++;
        this.env.stats.transitions += pass.changed;
        this.cached = { applied: record.applied, transitions: record.transitions, revision: written.revision, generation, snapshot: pass.snapshot! };
        if (pass.journal.length > 0) definition.onJournal?.(this.address, pass.journal);
        if (pass.observed) this.observe(pass.observed);
        // The outbox's events go out at once (before anything a hand-over publishes), its
        // commands are published meanwhile; local hand-overs (a step to this node's executor)
        // need nothing from it and go now.
        const publishing = publishOutbox(this.env.outbox, this.address, pass.outbox, written.revision, own !== undefined);
        for (const e of pass.local) this.env.local(e.channel, e.payload, this.address);
        if (publishing === NOTHING_TO_WAIT_FOR) {
          this.settleAll(pass.decisions, written.revision, true, () => true);
          this.countTerminated(pass.decisions);
          return "done";
        }
        // A caller in this process hears once the durable entries are out; a mailbox command is
        // acknowledged once the sends applied in memory are too (the lane waits for both).
        const durable = await publishing.durable;
        this.settleAll(pass.decisions, written.revision, durable, (d) => d.delivery.deliveries === undefined);
        const published = durable && (await publishing.all);
        // Unpublished entries are published again by whoever loads the record next.
        if (!published) {
          this.cached = undefined;
          this.republishLater();
        }
        this.settleAll(pass.decisions, written.revision, published, (d) => d.delivery.deliveries !== undefined);
        this.countTerminated(pass.decisions);
        return "done";
      }
      case "stale":
        this.env.stats.stale++;
        this.cached = undefined;
        return "stale";
      case "fenced":
        this.env.stats.fenced++;
        this.cached = undefined;
        this.env.logger.warn("write refused: partition fenced", {
          actor: this.key,
          partition: this.env.log.partition,
          epoch: this.env.log.epoch,
          newOwner: written.fence?.owner ?? null,
        });
        for (const d of batch) d.settle(undefined, "keep", "fenced");
        this.env.onFenced();
        return "done";
      case "unavailable":
        return "unavailable";
      case "too_large":
        // Refused before it was sent: nothing was written, the stored state is still `base`.
        await this.tooLarge(batch, `${written.bytes} bytes with headers, above the server's max_payload of ${written.limit}`);
        return "done";
    }
  }

  /**
   * The keys beside its record this transition sets (`runway.store` without a bucket), when they
   * can go out with the record: the host keeps the partition's own keys and every one is the actor's.
   */
  /** Hands each stored transition to the kind's `observe`; an observer that throws is logged, never the write's fault. */
  private observe(observed: NonNullable<Pass["observed"]>): void {
    for (const [before, after, event] of observed) {
      try {
        this.env.definition.observe!(this.address, before, after, event);
      } catch (err) {
        this.env.logger.warn("observe failed", { actor: this.key, error: String(err) });
      }
    }
  }

  private ownKeysOf(outbox: Pass["outbox"]): StoreEffect[] | undefined {
    if (!this.env.keys) return undefined;
    const own: StoreEffect[] = [];
    for (const entry of outbox) {
      const effect = entry.effect;
      if (effect.type !== "runway.store" || effect.bucket) continue;
      if (!isOwnKeyOf(this.address, effect)) return undefined;
      own.push(effect);
    }
    return own.length > 0 ? own : undefined;
  }

  /**
   * The record and then the keys its transition sets, as one chain (PartitionLog.writeAll): one
   * round trip instead of one after another, and the keys land only right behind their record.
   * Their values are known from here on, for the actor's next reads.
   */
  private async writeWithKeys(
    encoded: Uint8Array,
    headers: Record<string, string> | undefined,
    own: StoreEffect[],
    generation: number,
  ): Promise<LogWriteOutcome> {
    const record = { key: this.key, value: encoded, ...(headers ? { headers } : {}) };
    const written = await this.env.keys!.writeThrough(this.env.log, own, generation, this.env.clock, record);
    return written.outcome === "written" ? { outcome: "written", revision: written.revisions[0]! } : written;
  }

  private settleAll(decisions: readonly Decision[], revision: number, published: boolean, which: (d: Decision) => boolean): void {
    for (const d of decisions) {
      if (!which(d)) continue;
      const answer = d.answer.outcome === "applied" ? { ...d.answer, revision } : d.answer;
      d.delivery.settle(answer, published || d.answer.outcome !== "applied" ? d.how : "keep", d.reason, d.detail);
    }
  }

  /**
   * A stored transition's outbox did not all go out (the servers refused it past its retries). The
   * next pass loads the record and publishes it again, but the actor may wait on that very send's
   * answer and get no next command: the lane loads it itself, backing off, until a load has
   * published it (this or a pass's) or the partition is no longer this writer's.
   */
  private republishLater(): void {
    if (this.republishTimer || this.env.log.fenced) return;
    this.republishDelay = Math.min(this.republishDelay * 2 || REPUBLISH_FIRST_MS, REPUBLISH_MAX_MS);
    this.republishTimer = setTimeout(() => {
      this.republishTimer = undefined;
      this.reload = true;
      if (!this.running) {
        this.running = true;
        void this.drain();
      }
    }, this.republishDelay);
    this.republishTimer.unref?.();
  }

  private async republish(): Promise<void> {
    this.reload = false;
    // Loaded since (and so published), or no longer this writer's to publish.
    if (this.cached || this.env.log.fenced) {
      this.republishDelay = 0;
      return;
    }
    const loaded = await this.load().catch(() => ({ outcome: "unavailable" }) as const);
    if (loaded.outcome === "unavailable") this.republishLater();
    else this.republishDelay = 0;
  }

  /** Applies each command as a batch of its own; one that faults alone is settled by `faulted`. */
  private async applyEach(batch: Delivery[]): Promise<void> {
    for (const delivery of batch) {
      try {
        await this.apply([delivery]);
      } catch (err) {
        this.cached = undefined;
        this.faulted(delivery, err);
      }
    }
  }

  /**
   * A command that faulted its actor alone. Kept (delivered again after a backoff) until the
   * mailbox has delivered it `maxDeliveries` times; then dead-lettered (`poison`) and answered,
   * so nothing is redelivered for ever. An in-process command is kept: its caller sends it
   * through the mailbox, where it is counted.
   */
  private faulted(delivery: Delivery, err: unknown): void {
    // A record written by a later deploy is not this command's fault: it waits for a node that reads it.
    if (isFault(err) && err.code === "record_too_new") return delivery.settle(undefined, "keep", "fault");
    if ((delivery.deliveries ?? 0) < this.env.maxDeliveries) return delivery.settle(undefined, "keep", "fault");
    this.env.stats.terminated++;
    const detail = err instanceof Error ? err.message : String(err);
    this.env.logger.error("command dead-lettered: it faulted its actor on every delivery", {
      actor: this.key,
      command: delivery.id,
      deliveries: delivery.deliveries,
      error: detail,
    });
    delivery.settle({ outcome: "invalid_input", reason: DeadLetterReason.Poison }, "dead", DeadLetterReason.Poison, detail);
  }

  /**
   * The actor's stored record cannot be read (not msgpack, another schema or version, a
   * snapshot the machine cannot resolve). A command meeting it is kept until its N-th delivery
   * (a record read N times the same way is not a glitch), then dead-lettered and answered
   * `corrupt_record`; from then on every command for this actor is answered and dead-lettered
   * at once, until the record changes (an operator repairs or deletes it).
   */
  private corrupt(batch: Delivery[], revision: number, detail: string): void {
    const confirmed = this.corruptAt === revision || batch.some((d) => (d.deliveries ?? 0) >= this.env.maxDeliveries);
    if (!confirmed) {
      this.env.logger.error("actor record unreadable; its commands are kept", { actor: this.key, revision, detail });
      for (const d of batch) d.settle(undefined, "keep", DeadLetterReason.CorruptRecord);
      return;
    }
    if (this.corruptAt !== revision) this.env.logger.error("actor record unreadable; its commands are dead-lettered", { actor: this.key, revision, detail });
    this.corruptAt = revision;
    for (const d of batch) {
      this.env.stats.terminated++;
      d.settle({ outcome: "invalid_input", reason: DeadLetterReason.CorruptRecord }, "dead", DeadLetterReason.CorruptRecord, `revision ${revision}: ${detail}`);
    }
  }

  /**
   * The record a batch produced is larger than the server takes in one message. As for an
   * unencodable one: applied again one command at a time, and the command whose own state is
   * too large is refused `state_too_large` and dead-lettered; the actor keeps its state and
   * goes on serving.
   */
  private async tooLarge(batch: Delivery[], detail: string): Promise<void> {
    if (batch.length > 1) return this.applyEach(batch);
    const delivery = batch[0]!;
    this.env.stats.invalid++;
    this.env.stats.terminated++;
    this.env.logger.warn("command refused: its state is too large to store", { actor: this.key, command: delivery.id, detail });
    delivery.settle({ outcome: "invalid_input", reason: DeadLetterReason.StateTooLarge }, "dead", DeadLetterReason.StateTooLarge, detail);
  }

  /**
   * The state a batch produced cannot be encoded (e.g. a value nested too deep for the
   * encoder's recursion). Its commands are applied again one at a time, so only the command
   * whose own transition cannot be stored is refused (`invalid_input`, `state_unencodable`,
   * dead-lettered); the others are stored as usual and the actor keeps serving.
   */
  private async unencodable(batch: Delivery[], err: unknown): Promise<void> {
    if (batch.length > 1) return this.applyEach(batch);
    const delivery = batch[0]!;
    this.env.stats.invalid++;
    this.env.stats.terminated++;
    this.env.logger.warn("command refused: its state cannot be encoded", { actor: this.key, command: delivery.id, error: String(err) });
    delivery.settle({ outcome: "invalid_input", reason: DeadLetterReason.StateUnencodable }, "dead", DeadLetterReason.StateUnencodable, String(err));
  }

  private countTerminated(decisions: { how: string }[]): void {
    for (const d of decisions) if (d.how === "term" || d.how === "dead") this.env.stats.terminated++;
  }
}
