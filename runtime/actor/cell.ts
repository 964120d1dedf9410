import { initialTransition, transition, type AnyMachineSnapshot, type AnyStateMachine, type EventObject } from "xstate";
import type { Clock } from "../clock.js";
import { isFault } from "../errors.js";
import type { Logger } from "../log.js";
import type { PartitionLog } from "../store/partition-log.js";
import { EffectSchema, type ActorAddress, type ActorDefinition, type Effect } from "./define.js";
import { publishOutbox, type OutboxContext } from "./outbox.js";
import { actorRecordCodec, APPLIED_WINDOW, type ActorRecord, type CommandAnswer, type OutboxEntry } from "./wire.js";

/** One command waiting to be applied, from the mailbox or from an in-process dispatch. */
export interface Delivery {
  /** Idempotency identity of the command (`Rw-Id`). */
  id: string;
  event: unknown;
  /**
   * Settles the command: `ack` (done, answer it), `term` (never deliver again), or `keep`
   * (leave it unacknowledged for the partition's next owner).
   */
  settle(answer: CommandAnswer | undefined, how: "ack" | "term" | "keep", reason?: string): void;
}

export interface CellEnvironment {
  definition: ActorDefinition;
  log: PartitionLog;
  outbox: OutboxContext;
  clock: Clock;
  logger: Logger;
  maxBatch: number;
  faults: HostFaults;
  stats: HostStats;
  onFenced(): void;
  /** Delivers a stored transition's `runway.local` effects in this process. */
  local(channel: string, payload: unknown, from: ActorAddress): void;
}

/** Test seams: called around the durable write. Production passes none. */
export interface HostFaults {
  beforeWrite?(address: ActorAddress): void | Promise<void>;
  afterWrite?(address: ActorAddress, revision: number): void | Promise<void>;
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
}

interface Cached {
  record: ActorRecord;
  revision: number;
  generation: number;
  /** The live XState snapshot of `record`, kept so a hot actor is not re-resolved per batch. */
  snapshot: AnyMachineSnapshot;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The serial lane of one actor key: load → pure transition → fenced write → outbox → ack.
 * Commands queued while a write is in flight are applied together in the next pass, so a busy
 * actor costs one write per batch rather than one per command.
 */
export class ActorCell {
  private queue: Delivery[] = [];
  private running = false;
  private cached: Cached | undefined;
  private idle: Promise<void> = Promise.resolve();
  private markIdle: (() => void) | undefined;

  constructor(
    readonly address: ActorAddress,
    readonly key: string,
    private readonly env: CellEnvironment,
  ) {}

  get busy(): boolean {
    return this.running;
  }

  enqueue(delivery: Delivery): void {
    this.queue.push(delivery);
    if (!this.running) {
      this.running = true;
      this.idle = new Promise((r) => (this.markIdle = r));
      void this.drain();
    }
  }

  /** Resolves when the queue is empty and nothing is in flight. */
  whenIdle(): Promise<void> {
    return this.idle;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.env.maxBatch);
        try {
          await this.apply(batch);
        } catch (err) {
          // A fault here is a bug or a store fault we could not classify; the commands stay
          // unacknowledged and come back after the ack wait.
          this.cached = undefined;
          this.env.logger.error("actor batch failed", { actor: this.key, error: String((err as Error).stack ?? err) });
          for (const d of batch) d.settle(undefined, "keep", "fault");
        }
        if (this.env.log.fenced) {
          for (const d of this.queue.splice(0)) d.settle(undefined, "keep", "fenced");
        }
      }
    } finally {
      this.running = false;
      this.markIdle?.();
    }
  }

  private async load(): Promise<{ outcome: "loaded"; cached: Cached | undefined } | { outcome: "unavailable" }> {
    const log = this.env.log;
    if (this.cached && this.cached.generation === log.generation) return { outcome: "loaded", cached: this.cached };
    const generation = log.generation;
    const read = await log.read(this.key);
    if (read.outcome === "unavailable") return { outcome: "unavailable" };
    if (read.outcome === "missing" || read.message.headers["KV-Operation"] === "DEL" || read.message.headers["KV-Operation"] === "PURGE") {
      this.cached = undefined;
      return { outcome: "loaded", cached: undefined };
    }
    const decoded = actorRecordCodec.decode(read.message.data);
    if (!decoded.ok) throw new Error(`actor ${this.key} record unreadable: ${decoded.reason} ${decoded.detail}`);
    // The writer of this record may have died before publishing its outbox: publish it again
    // (idempotent by entry id) before anything new is decided.
    if (decoded.value.outbox.length > 0) {
      const ok = await publishOutbox(this.env.outbox, this.address, decoded.value.outbox);
      if (!ok) return { outcome: "unavailable" };
    }
    const machine = this.env.definition.machine as AnyStateMachine;
    this.cached = { record: decoded.value, revision: read.message.seq, generation, snapshot: machine.resolveState(decoded.value.snapshot as never) };
    return { outcome: "loaded", cached: this.cached };
  }

  private async apply(batch: Delivery[]): Promise<void> {
    const { definition, clock } = this.env;
    const machine = definition.machine as AnyStateMachine;
    for (let attempt = 0; ; attempt++) {
      if (this.env.log.fenced) {
        for (const d of batch) d.settle(undefined, "keep", "fenced");
        return;
      }
      const loaded = await this.load();
      if (loaded.outcome === "unavailable") {
        await sleep(Math.min(25 * 2 ** attempt, 1_000));
        continue;
      }
      const base = loaded.cached;
      let snapshot: AnyMachineSnapshot | undefined = base?.snapshot;
      const applied = base ? [...base.record.applied] : [];
      const outbox: OutboxEntry[] = [];
      const local: Extract<Effect, { type: "runway.local" }>[] = [];
      const decisions: { delivery: Delivery; answer: CommandAnswer; how: "ack" | "term" | "keep"; reason?: string }[] = [];
      let changed = 0;
      for (const delivery of batch) {
        if (applied.includes(delivery.id)) {
          this.env.stats.duplicates++;
          decisions.push({ delivery, answer: { outcome: "duplicate" }, how: "ack" });
          continue;
        }
        const parsed = definition.events.safeParse(delivery.event);
        if (!parsed.success) {
          this.env.stats.invalid++;
          const reason = parsed.error.issues.map((i) => `${i.path.join(".") || "event"}: ${i.message}`).join("; ");
          decisions.push({ delivery, answer: { outcome: "invalid_input", reason }, how: "term", reason: `invalid_input: ${reason}` });
          continue;
        }
        const now = clock.now();
        const effects: Effect[] = [];
        if (!snapshot) {
          const [initial, actions] = initialTransition(machine, definition.input?.(this.address.id));
          snapshot = initial;
          effects.push(...collectEffects(actions));
        }
        let event: EventObject = { ...(parsed.data as EventObject), now } as EventObject;
        if (definition.prepare) {
          try {
            event = await prepareWithRetry(definition.prepare, event, snapshot);
          } catch (err) {
            if (isFault(err) && err.kind === "retryable") {
              // The store is unavailable: keep the command for a later delivery rather than lose it.
              decisions.push({ delivery, answer: { outcome: "invalid_input", reason: "unavailable" }, how: "keep", reason: "prepare unavailable" });
              continue;
            }
            this.env.stats.invalid++;
            const reason = err instanceof Error ? err.message : String(err);
            decisions.push({ delivery, answer: { outcome: "invalid_input", reason }, how: "term", reason: `invalid_input: ${reason}` });
            continue;
          }
        }
        if (!snapshot.can(event)) {
          this.env.stats.refused++;
          decisions.push({ delivery, answer: { outcome: "refused", state: snapshot.value }, how: "ack" });
          continue;
        }
        try {
          const [next, actions] = transition(machine, snapshot, event);
          const produced = collectEffects(actions);
          if (next.context === snapshot.context && next.value === snapshot.value && produced.every((e) => e.type === "runway.answer")) {
            // Answered without a change (e.g. a stale report): nothing to store, nothing to fence.
            const answer = produced.find((e) => e.type === "runway.answer");
            decisions.push({ delivery, answer: { outcome: "applied", revision: base?.revision ?? 0, ...(answer ? { value: answer.value } : {}) }, how: "ack" });
            continue;
          }
          effects.push(...produced, ...(definition.effects?.(this.address, snapshot, next) ?? []));
          snapshot = next;
        } catch (err) {
          // A machine that throws or emits nonsense is a bug; the command must not wedge the actor.
          this.env.logger.error("machine fault", { actor: this.key, command: delivery.id, error: String(err) });
          decisions.push({ delivery, answer: { outcome: "invalid_input", reason: "machine_fault" }, how: "term", reason: "machine_fault" });
          continue;
        }
        const answer = effects.find((e) => e.type === "runway.answer");
        for (const e of effects) if (e.type === "runway.local") local.push(e);
        effects
          .filter((e) => e.type !== "runway.answer" && e.type !== "runway.local")
          .forEach((effect, i) => outbox.push({ id: `${delivery.id}/${i}`, effect }));
        applied.push(delivery.id);
        changed++;
        decisions.push({ delivery, answer: { outcome: "applied", revision: 0, ...(answer ? { value: answer.value } : {}) }, how: "ack" });
      }
      if (changed === 0) {
        for (const d of decisions) d.delivery.settle(d.answer, d.how, d.reason);
        this.countTerminated(decisions);
        return;
      }
      let record: ActorRecord;
      let encoded: Uint8Array;
      try {
        // Both walk the whole state recursively (XState's persisted copy, then msgpack).
        record = {
          kind: this.address.kind,
          id: this.address.id,
          snapshot: machine.getPersistedSnapshot(snapshot!),
          applied: applied.slice(-APPLIED_WINDOW),
          outbox,
          transitions: (base?.record.transitions ?? 0) + changed,
          writer: { node: this.env.log.authority.node, epoch: this.env.log.epoch },
          at: clock.now(),
        };
        encoded = actorRecordCodec.encode(record);
      } catch (err) {
        // Left unacknowledged, these commands would come back and fail the same way for ever.
        this.cached = undefined;
        return this.unencodable(batch, err);
      }
      await this.env.faults.beforeWrite?.(this.address);
      const generation = this.env.log.generation;
      const ttl = definition.ttl?.(snapshot!);
      const headers = ttl === undefined ? undefined : { "Nats-TTL": `${Math.max(1, Math.ceil(ttl / 1_000))}s`, "Nats-Rollup": "sub" };
      const written = await this.env.log.write(this.key, encoded, headers);
      switch (written.outcome) {
        case "written": {
          this.env.stats.writes++;
          this.env.stats.transitions += changed;
          this.cached = { record, revision: written.revision, generation, snapshot: snapshot! };
          await this.env.faults.afterWrite?.(this.address, written.revision);
          const published = await publishOutbox(this.env.outbox, this.address, outbox);
          // Unpublished entries are published again by whoever loads the record next.
          if (!published) this.cached = undefined;
          for (const e of local) this.env.local(e.channel, e.payload, this.address);
          for (const d of decisions) {
            const answer = d.answer.outcome === "applied" ? { ...d.answer, revision: written.revision } : d.answer;
            d.delivery.settle(answer, published || d.answer.outcome !== "applied" ? d.how : "keep", d.reason);
          }
          this.countTerminated(decisions);
          return;
        }
        case "stale":
          this.env.stats.stale++;
          this.cached = undefined;
          continue;
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
          return;
        case "unavailable":
          await sleep(Math.min(25 * 2 ** attempt, 1_000));
          continue;
      }
    }
  }

  /**
   * The state a batch produced cannot be encoded (e.g. a value nested too deep for the
   * encoder's recursion). Its commands are applied again one at a time, so only the command
   * whose own transition cannot be stored is refused (`invalid_input`, `state_unencodable`,
   * terminated); the others are stored as usual and the actor keeps serving.
   */
  private async unencodable(batch: Delivery[], err: unknown): Promise<void> {
    if (batch.length > 1) {
      for (const delivery of batch) await this.apply([delivery]);
      return;
    }
    const delivery = batch[0]!;
    this.env.stats.invalid++;
    this.env.stats.terminated++;
    this.env.logger.warn("command refused: its state cannot be encoded", { actor: this.key, command: delivery.id, error: String(err) });
    delivery.settle({ outcome: "invalid_input", reason: "state_unencodable" }, "term", "state_unencodable");
  }

  private countTerminated(decisions: { how: string }[]): void {
    for (const d of decisions) if (d.how === "term") this.env.stats.terminated++;
  }
}

function collectEffects(actions: readonly { type: string; params?: unknown }[]): Effect[] {
  const out: Effect[] = [];
  for (const action of actions) {
    if (action.type !== "xstate.emit") continue;
    const emitted = (action.params as { event?: unknown } | undefined)?.event;
    const parsed = EffectSchema.safeParse(emitted);
    if (!parsed.success) throw new Error(`machine emitted an invalid effect: ${JSON.stringify(emitted)}: ${parsed.error.message}`);
    out.push(parsed.data);
  }
  return out;
}

async function prepareWithRetry(prepare: NonNullable<ActorDefinition["prepare"]>, event: EventObject, snapshot: AnyMachineSnapshot): Promise<EventObject> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await prepare(event, snapshot);
    } catch (err) {
      if (!(isFault(err) && err.kind === "retryable") || attempt >= 5) throw err;
      await sleep(Math.min(50 * 2 ** attempt, 1_000));
    }
  }
}
