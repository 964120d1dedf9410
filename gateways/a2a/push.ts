import { randomUUID } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { StreamResponse, TaskState, type Task, type TaskStatus } from "@a2a-js/sdk";
import { awaitedInboxItem, type RunEvent } from "../../actors/index.js";
import type { Logger } from "../../runtime/index.js";
import type { RunService } from "../api/run-service.js";
import { keyParts, PushConfigs, type Delivery, type PushConfig, type Versioned } from "./push-configs.js";
import { TERMINAL_STATES, taskOf, type TaskRecords } from "./tasks.js";

export interface PushDeliveryDeps {
  nc: NatsConnection;
  runs: RunService;
  tasks: TaskRecords;
  configs: PushConfigs;
  logger: Logger;
  now(): number;
  /** This node: the owner named in the leases it takes (a node restarted under its name takes its own leases back at once). */
  node: string;
  /** A config's lease: another node takes its delivery over once it lapsed (default 15 s). */
  leaseMs?: number;
  /** How often a delivery reads its run's journal without a live event (default 1 s). */
  pollMs?: number;
  /** How often configs nobody delivers are looked for (default 5 s; a config stored through this node's handler is looked for at once). */
  scanMs?: number;
  /** First retry delay of a failed POST, doubled each time up to `retryMaxMs` (defaults 250 ms, 30 s). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** POSTs of one update before its config is given up (default 20). */
  maxAttempts?: number;
  /** One POST's bound (default 10 s). */
  timeoutMs?: number;
}

const WORKING = TaskState.TASK_STATE_WORKING;
const INPUT = TaskState.TASK_STATE_INPUT_REQUIRED;

/** The task's state after one journal event of its run (tasks.ts `stateOf`, event by event). */
export function stateAfter(event: RunEvent, state: TaskState | undefined): TaskState | undefined {
  switch (event.type) {
    case "run_queued":
    case "run_started":
      return WORKING;
    case "run_waiting":
      return event.on === "approval" || event.on === "event" ? INPUT : WORKING;
    case "approval_decided":
    case "approval_expired":
    case "signal_received":
      return state === INPUT ? WORKING : state;
    case "run_succeeded":
      return TaskState.TASK_STATE_COMPLETED;
    case "run_failed":
      return TaskState.TASK_STATE_FAILED;
    case "run_cancelled":
      return TaskState.TASK_STATE_CANCELED;
    default:
      return state;
  }
}

/** Why a delivery stopped: its config is gone, done, given up, or another node holds it. */
class Stop extends Error {}

/**
 * Delivers the tasks' push notifications: each config in `rw_a2a_push` is delivered by one node
 * at a time (a lease in the config, taken and renewed by fenced writes), from its run's journal:
 * each event that changes the task's state is POSTed to the config's URL as a `StreamResponse`
 * (a `statusUpdate`, the result's `artifactUpdate` before `completed`), in journal order, each
 * retried with backoff until the receiver takes it, and only then is the event's id stored as the
 * config's cursor. So delivery is at least once and in order per config, and a node that dies
 * mid-way leaves the rest to whoever takes the lease next (itself, restarted): it starts again
 * after the last event whose delivery was stored. A deleted config is POSTed nothing more (each
 * POST is preceded by a read of the config).
 */
export class PushDeliverer {
  private readonly active = new Map<string, AbortController>();
  private readonly stopping = new AbortController();
  private scanner: ReturnType<typeof setInterval> | undefined;
  private scanning: Promise<void> | undefined;
  private again = false;
  private readonly ended = new Set<string>();
  private readonly loops = new Set<Promise<void>>();

  constructor(private readonly deps: PushDeliveryDeps) {}

  private get leaseMs(): number {
    return this.deps.leaseMs ?? 15_000;
  }

  start(): void {
    this.kick();
    this.scanner = setInterval(() => this.kick(), this.deps.scanMs ?? 5_000);
  }

  /** Looks for configs to deliver now (a config just stored is delivered without waiting for the next scan). */
  kick(): void {
    if (this.stopping.signal.aborted) return;
    if (this.scanning) {
      this.again = true;
      return;
    }
    this.again = false;
    this.scanning = this.scan()
      .catch((err: unknown) => this.deps.logger.warn("a2a push scan failed", { error: String((err as Error)?.message ?? err) }))
      .finally(() => {
        this.scanning = undefined;
        if (this.again) this.kick();
      });
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    if (this.scanner) clearInterval(this.scanner);
    await this.scanning;
    await Promise.allSettled([...this.loops]);
  }

  private async scan(): Promise<void> {
    const listed = await this.deps.configs.list(">");
    // A delivery done stays done (a config created again under its id keeps it): not read again while listed.
    const keys = new Set(listed.map((c) => c.key));
    for (const key of this.ended) if (!keys.has(key)) this.ended.delete(key);
    for (const config of listed) {
      if (this.active.has(config.key) || this.ended.has(config.key) || this.stopping.signal.aborted) continue;
      const delivery = await this.deps.configs.delivery(config.key);
      if (!delivery) continue;
      const r = delivery.record;
      if (r.done) this.ended.add(config.key);
      if (r.done || r.gave_up) continue;
      if (r.lease && r.lease.owner !== this.deps.node && r.lease.until > this.deps.now()) continue;
      this.begin(delivery);
    }
  }

  /** Takes the config's lease and delivers it until it is done (or gone, or taken). */
  private begin(delivery: Versioned<Delivery>): void {
    const parts = keyParts(delivery.key);
    if (!parts || this.active.has(delivery.key)) return;
    const ac = new AbortController();
    this.active.set(delivery.key, ac);
    const loop = new Deliver(this.deps, delivery, parts, AbortSignal.any([ac.signal, this.stopping.signal]), this.leaseMs)
      .run()
      .catch((err: unknown) => {
        if (!(err instanceof Stop)) this.deps.logger.warn("a2a push delivery stopped", { key: delivery.key, error: String((err as Error)?.message ?? err) });
      })
      .finally(() => {
        this.active.delete(delivery.key);
        this.loops.delete(loop);
      });
    this.loops.add(loop);
  }
}

/** One config's delivery, while this node holds its lease. */
class Deliver {
  private record: Delivery;
  private revision: number;

  constructor(
    private readonly deps: PushDeliveryDeps,
    entry: Versioned<Delivery>,
    private readonly at: { tenant: string; agent: string; task: string; id: string },
    private readonly signal: AbortSignal,
    private readonly leaseMs: number,
  ) {
    this.record = entry.record;
    this.revision = entry.revision;
  }

  async run(): Promise<void> {
    await this.save({});
    let wake: (() => void) | undefined;
    let heard = false;
    const sub = this.deps.nc.subscribe(`rw.evt.${this.at.tenant}.*.${this.at.task}.*`, {
      callback: () => {
        heard = true;
        wake?.();
      },
    });
    try {
      while (!this.signal.aborted) {
        heard = false;
        try {
          if (await this.drain()) return;
        } catch (err) {
          if (err instanceof Stop) throw err;
          this.deps.logger.warn("a2a push delivery failed; retried", { task: this.at.task, config: this.at.id, error: String((err as Error)?.message ?? err) });
        }
        if (heard) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, this.deps.pollMs ?? 1_000);
          const aborted = () => done();
          const signal = this.signal;
          function done() {
            clearTimeout(timer);
            wake = undefined;
            signal.removeEventListener("abort", aborted);
            resolve();
          }
          wake = done;
          signal.addEventListener("abort", aborted, { once: true });
        });
      }
    } finally {
      sub.unsubscribe();
      // A node that stops hands its lease back: another node takes the delivery over at its next scan.
      if (this.signal.aborted) {
        const { lease: _lease, ...rest } = this.record;
        await this.deps.configs.updateDelivery(this.key, rest, this.revision).catch(() => undefined);
      }
    }
  }

  /** Writes the record with `changes` and a renewed lease, fenced by the revision read last: a config deleted or taken meanwhile stops the delivery. */
  private async save(changes: Partial<Delivery>): Promise<void> {
    const next: Delivery = { ...this.record, ...changes, lease: { owner: this.deps.node, until: this.deps.now() + this.leaseMs } };
    const revision = await this.deps.configs.updateDelivery(this.key, next, this.revision);
    if (revision === undefined) throw new Stop("the config changed under its delivery");
    this.record = next;
    this.revision = revision;
  }

  private get key(): string {
    return PushConfigs.key(this.at.tenant, this.at.agent, this.at.task, this.at.id);
  }

  /** The task now, as `GetTask` reads it (with what it asks a person), or undefined when its record is gone. */
  private async readTask(): Promise<Task | undefined> {
    const record = await this.deps.tasks.get(this.at.tenant, this.at.agent, this.at.task);
    if (!record) return undefined;
    const view = record.rejected ? undefined : await this.deps.runs.get(this.at.tenant, this.at.task);
    let ask: unknown;
    if (view?.waiting?.on === "approval" && view.waiting.ref) {
      const item = await awaitedInboxItem(this.deps.nc, this.at.tenant, view.waiting.ref);
      if (item) ask = { id: item.id, kind: item.kind, prompt: item.prompt, payload: item.payload, expires_at: item.expires_at };
    }
    if (!view && !record.rejected) return undefined;
    return taskOf(this.at.task, record, view, ask);
  }

  /** Delivers what the journal holds after the cursor: true once the delivery is over (terminal state delivered). */
  private async drain(): Promise<boolean> {
    if (this.record.snapshot) {
      const task = await this.readTask();
      if (!task) return this.gone();
      await this.deliverState(task, task.status!);
      await this.save({ snapshot: false, sent: { state: task.status!.state, ...this.refOf(task) } });
      if (TERMINAL_STATES.has(task.status!.state)) return this.finish();
    }
    for (;;) {
      const page = await this.deps.runs.events(this.at.tenant, this.at.task, { ...(this.record.cursor ? { after: this.record.cursor } : {}), limit: 500 });
      if (page.outcome === "run_not_found") {
        // No run (yet: a config given in SendMessage is stored before its run starts), or none ever: a rejected start.
        const record = await this.deps.tasks.get(this.at.tenant, this.at.agent, this.at.task);
        if (!record) return this.gone();
        if (!record.rejected) return false;
        const task = taskOf(this.at.task, record, undefined);
        await this.deliverState(task, task.status!);
        return this.finish();
      }
      let task: Task | undefined;
      let state = this.record.sent?.state;
      for (const event of page.events) {
        const next = stateAfter(event, state);
        const ref = event.type === "run_waiting" && typeof event.ref === "string" ? event.ref : undefined;
        const changed = next !== undefined && (next !== state || (next === INPUT && ref !== undefined && ref !== this.record.sent?.ref));
        if (changed) {
          task ??= await this.readTask();
          if (!task) return this.gone();
          const status: TaskStatus =
            task.status!.state === next ? task.status! : { state: next, message: undefined, timestamp: new Date(event.at).toISOString() };
          await this.deliverState(task, status);
          state = next;
          await this.save({ cursor: event.id, sent: { state: next, ...(ref ? { ref } : {}) } });
          if (TERMINAL_STATES.has(next)) return this.finish();
        }
      }
      if (page.compacted) {
        // The journal is gone: the task's final state is what is left to say.
        const final = await this.readTask();
        if (!final) return this.gone();
        await this.deliverState(final, final.status!);
        return this.finish();
      }
      const moved = page.last !== null && page.last !== this.record.cursor;
      if (moved || this.record.lease!.until - this.deps.now() < this.leaseMs / 2) await this.save(moved ? { cursor: page.last } : {});
      if (!page.more) return false;
    }
  }

  private refOf(task: Task): { ref?: string } {
    const ref = task.status?.message?.messageId.split("/ask/")[1];
    return ref ? { ref } : {};
  }

  /** POSTs a state: the result artifact first when it is new and the task completed, then the status. */
  private async deliverState(task: Task, status: TaskStatus): Promise<void> {
    if (status.state === TaskState.TASK_STATE_COMPLETED) {
      for (const artifact of task.artifacts) {
        if (this.record.artifacts.includes(artifact.artifactId)) continue;
        await this.post({
          payload: {
            $case: "artifactUpdate",
            value: { taskId: task.id, contextId: task.contextId, artifact, append: false, lastChunk: true, metadata: undefined },
          },
        });
        await this.save({ artifacts: [...this.record.artifacts, artifact.artifactId] });
      }
    }
    await this.post({ payload: { $case: "statusUpdate", value: { taskId: task.id, contextId: task.contextId, status, metadata: undefined } } });
  }

  /** POSTs one update until the receiver answers 2xx, with backoff; the config is read before each try (deleted: nothing more is sent). */
  private async post(update: StreamResponse): Promise<void> {
    const body = JSON.stringify(StreamResponse.toJSON(update));
    const max = this.deps.maxAttempts ?? 20;
    for (let attempt = 0; ; attempt++) {
      if (this.signal.aborted) throw new Stop("stopping");
      const config = (await this.deps.configs.get(this.key))?.record;
      if (!config) {
        await this.deps.configs.delete(this.key);
        throw new Stop("the config was deleted");
      }
      const headers = headersOf(config);
      let why: string;
      try {
        const res = await fetch(config.url, {
          method: "POST",
          headers,
          body,
          redirect: "manual",
          signal: AbortSignal.any([this.signal, AbortSignal.timeout(this.deps.timeoutMs ?? 10_000)]),
        });
        await res.body?.cancel().catch(() => undefined);
        if (res.ok) return;
        why = `HTTP ${res.status}`;
      } catch (err) {
        why = String((err as Error)?.message ?? err);
      }
      if (attempt + 1 >= max) {
        await this.save({ gave_up: { at: this.deps.now(), reason: why } });
        throw new Stop(`given up: ${why}`);
      }
      const delay = Math.min((this.deps.retryBaseMs ?? 250) * 2 ** attempt, this.deps.retryMaxMs ?? 30_000);
      await this.save({});
      await new Promise<void>((resolve) => {
        const aborted = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          this.signal.removeEventListener("abort", aborted);
          resolve();
        }, delay);
        this.signal.addEventListener("abort", aborted, { once: true });
      });
    }
  }

  private async finish(): Promise<boolean> {
    await this.save({ done: true });
    return true;
  }

  /** The task is gone (its record deleted): so is its config. */
  private async gone(): Promise<boolean> {
    await this.deps.configs.delete(this.key);
    return true;
  }
}

/** A deliverer's owner name when its node gives none. */
export function anonymousNode(): string {
  return `a2a-${randomUUID()}`;
}

/** A POST's headers: the A2A media type, the config's token and its `Authorization`. */
function headersOf(config: PushConfig): Record<string, string> {
  const headers: Record<string, string> = { "Content-Type": "application/a2a+json", "A2A-Version": "1.0" };
  if (config.token) headers["X-A2A-Notification-Token"] = config.token;
  if (config.authentication) headers.Authorization = `${config.authentication.scheme} ${config.authentication.credentials}`;
  return headers;
}
