import { randomUUID } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  TaskState,
  type AgentCard,
  type CancelTaskRequest,
  type DeleteTaskPushNotificationConfigRequest,
  type GetExtendedAgentCardRequest,
  type GetTaskPushNotificationConfigRequest,
  type GetTaskRequest,
  type ListTaskPushNotificationConfigsRequest,
  type ListTaskPushNotificationConfigsResponse,
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import type { A2ARequestHandler, ServerCallContext } from "@a2a-js/sdk/server";
import { ContentTypeNotSupportedError, RequestMalformedError, TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import { awaitedInboxItem, runIdFor, startKey, tenantOfRun, type DefinitionStore } from "../../actors/index.js";
import type { RunService } from "../api/run-service.js";
import type { ExposedAgent } from "./agents.js";
import { inputOf, statusTime, TERMINAL_STATES, taskOf, textPart, type TaskRecord, type TaskRecords } from "./tasks.js";
import { runChanges, RunWatch } from "./watch.js";
import { callerOf, type Caller } from "./caller.js";
import { answerTask, type AnswerContext, type TaskRead } from "./answers.js";
import { configOf, freshDelivery, MAX_PUSH_CONFIGS, messageConfigId, PushConfigs, pushSettingsOf, type PushConfig, type PushSettings } from "./push-configs.js";

export interface A2aDeps {
  nc: NatsConnection;
  runs: RunService;
  definitions: DefinitionStore;
  tasks: TaskRecords;
  /** The tasks' push-notification configs. */
  push: PushConfigs;
  /** Called once a config was stored: its delivery starts without waiting for the deliverer's next scan. */
  pushed?: () => void;
  now(): number;
  /** How often a waiting call reads the run's journal without a live event (default 1 s). */
  pollMs?: number;
  /** How long a blocking SendMessage waits for its task to end or ask for input (default 5 min): then it answers the task as it is. */
  blockingMs?: number;
}

/** Bounds on what a client names: they become KV keys and start keys. */
const MAX_ID = 200;
const INTERRUPTED = TaskState.TASK_STATE_INPUT_REQUIRED;
const REJECTING = new Set(["tenant_killed", "tenant_draining", "day_cap_reached", "budget_exhausted", "queue_full", "lane_not_allowed"]);

/** Ends an interrupted or terminal wait: the task is done, or waits for its client. */
function settled(state: TaskState): boolean {
  return TERMINAL_STATES.has(state) || state === INTERRUPTED;
}

/** A media type (or range) a client accepts that a task's artifacts and messages can be in. */
function producible(mode: string): boolean {
  const m = mode.split(";", 1)[0]!.trim().toLowerCase();
  return m === "*/*" || m === "text/*" || m === "application/*" || m === "text/plain" || m === "application/json";
}

/** A page token is the position of the page in the list, base64url: one made here, or undefined. */
function offsetOf(token: string): number | undefined {
  const text = Buffer.from(token, "base64url").toString();
  return /^[1-9][0-9]{0,8}$/.test(text) && Buffer.from(text).toString("base64url") === token ? Number(text) : undefined;
}

/** A new task whose run was just started and not read: a watch made before hears its every event. */
interface Started {
  record: TaskRecord;
}

/** A task as read now, with its run. */
type Read = TaskRead;

/**
 * One exposed agent's A2A request handler over durable runs (the SDK's `A2ARequestHandler`,
 * mounted by its JSON-RPC and REST express handlers): a task is a run of the agent's definition,
 * started under the message's id; every read is of the run's stored record and journal, so any
 * node answers for any task, and a stream that broke is resumed elsewhere by `SubscribeToTask`.
 */
export class AgentHandler implements A2ARequestHandler {
  /** What answering a task's question (a follow-up message) needs of this handler. */
  private readonly answers: AnswerContext;

  constructor(
    private readonly deps: A2aDeps,
    private readonly tenant: string,
    private readonly agent: ExposedAgent,
    private readonly card: AgentCard,
  ) {
    this.answers = { ...deps, tenant, agent: agent.name, read: (id, known) => this.read(id, known) };
  }

  async getAgentCard(): Promise<AgentCard> {
    return this.card;
  }

  async getAuthenticatedExtendedAgentCard(_params: GetExtendedAgentCardRequest, _context: ServerCallContext): Promise<AgentCard> {
    return this.card;
  }

  async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    const caller = callerOf(context);
    const id = params.configuration?.returnImmediately ? undefined : this.taskIdOf(params.message);
    if (id === undefined) return (await this.deliver(params, caller)).task;
    // Listening before the message is delivered (on the connection its writes take, so the server
    // has the subscription first): the run's every event from then on is heard, and the task is read
    // again only when one may settle it.
    const bound = AbortSignal.any([caller.signal, AbortSignal.timeout(this.deps.blockingMs ?? 300_000)]);
    const watch = new RunWatch(this.deps, this.tenant, id, { pollMs: this.deps.pollMs ?? 1_000, signal: bound, settling: true });
    try {
      const delivered = await this.deliver(params, caller, watch);
      if ("task" in delivered && (delivered.task.id !== id || settled(delivered.task.status!.state))) return delivered.task;
      return await this.waitSettled(id, delivered, watch);
    } finally {
      watch.close();
    }
  }

  /** The task a message is for: the one it answers, or the one its id starts (undefined: the message is no message, which delivering it says). */
  private taskIdOf(message: Message | undefined): string | undefined {
    if (message?.taskId) return message.taskId;
    if (!message?.messageId || message.messageId.length > MAX_ID) return undefined;
    return runIdFor(this.tenant, startKey("a2a", `${this.agent.name}/${message.messageId}`));
  }

  async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const caller = callerOf(context);
    const read = await this.deliver(params, caller);
    yield { payload: { $case: "task", value: read.task } };
    if (settled(read.task.status!.state)) return;
    yield* this.updates(read, caller.signal);
  }

  async getTask(params: GetTaskRequest, _context: ServerCallContext): Promise<Task> {
    return (await this.read(params.id)).task;
  }

  async listTasks(params: ListTasksRequest, _context: ServerCallContext): Promise<ListTasksResponse> {
    const pageSize = params.pageSize ?? 50;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) throw new RequestMalformedError("pageSize is 1 to 100");
    const offset = params.pageToken ? offsetOf(params.pageToken) : 0;
    if (offset === undefined) throw new RequestMalformedError("pageToken is a nextPageToken of an earlier page");
    const after = params.statusTimestampAfter ? Date.parse(params.statusTimestampAfter) : undefined;
    if (after !== undefined && Number.isNaN(after)) throw new RequestMalformedError("statusTimestampAfter is an RFC 3339 time");
    const records = (await this.deps.tasks.list(this.tenant, this.agent.name)).filter((r) => !params.contextId || r.record.context_id === params.contextId);
    const read: { task: Task; at: number }[] = [];
    // A bounded number of runs read at a time.
    for (let i = 0; i < records.length; i += 32) {
      const batch = await Promise.all(
        records.slice(i, i + 32).map(async ({ id, record }) => {
          const view = await this.deps.runs.get(this.tenant, id);
          if (!view && !record.rejected) return undefined;
          return { task: taskOf(id, record, view), at: view ? statusTime(view) : (record.rejected?.at ?? record.created_at) };
        }),
      );
      for (const r of batch) if (r) read.push(r);
    }
    const matching = read
      .filter((r) => !params.status || r.task.status?.state === params.status)
      .filter((r) => after === undefined || r.at > after)
      .sort((a, b) => b.at - a.at || (a.task.id < b.task.id ? -1 : a.task.id > b.task.id ? 1 : 0));
    const page = matching.slice(offset, offset + pageSize).map((r) => (params.includeArtifacts ? r.task : { ...r.task, artifacts: [] }));
    const next = offset + pageSize < matching.length ? Buffer.from(String(offset + pageSize)).toString("base64url") : "";
    return { tasks: page, nextPageToken: next, pageSize, totalSize: matching.length };
  }

  async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const read = await this.read(params.id);
    if (!read.view) throw new TaskNotCancelableError(`task ${params.id} was rejected: it has no run`);
    const answer = await this.deps.runs.cancel(this.tenant, params.id, "cancelled by an A2A client", callerOf(context).by);
    if (answer.outcome === "run_not_found" || answer.outcome === "tenant_not_found") throw new TaskNotFoundError(`no task ${params.id}`);
    if (answer.outcome === "not_cancellable") throw new TaskNotCancelableError(`task ${params.id} ended: ${answer.run.status}`);
    return (await this.read(params.id)).task;
  }

  async *resubscribe(params: SubscribeToTaskRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const read = await this.read(params.id);
    if (TERMINAL_STATES.has(read.task.status!.state)) throw new UnsupportedOperationError(`task ${params.id} is in a terminal state`);
    yield { payload: { $case: "task", value: read.task } };
    yield* this.updates(read, callerOf(context).signal);
  }

  async createTaskPushNotificationConfig(params: TaskPushNotificationConfig, _context: ServerCallContext): Promise<TaskPushNotificationConfig> {
    const read = await this.read(params.taskId);
    const settings = pushSettingsOf(params);
    return configOf(this.tenant, await this.attachPush(read, { ...settings, id: settings.id ?? randomUUID() }));
  }

  /** Stores a config on a task under way: delivered from now on, the task as it is now first, then each change its run's journal holds after this point. */
  private async attachPush(read: Read, settings: PushSettings & { id: string }): Promise<PushConfig> {
    const key = PushConfigs.key(this.tenant, this.agent.name, read.task.id, settings.id);
    const known = await this.deps.push.list(PushConfigs.key(this.tenant, this.agent.name, read.task.id, "*"));
    if (known.length >= MAX_PUSH_CONFIGS && !known.some((k) => k.key === key))
      throw new RequestMalformedError(`a task has at most ${MAX_PUSH_CONFIGS} push notification configs`);
    const cursor = read.view ? await this.journalEnd(read.task.id) : null;
    const stored = await this.deps.push.put(key, this.pushConfig(read.task.id, settings), freshDelivery(cursor, true));
    this.deps.pushed?.();
    return stored;
  }

  async getTaskPushNotificationConfig(params: GetTaskPushNotificationConfigRequest, _context: ServerCallContext): Promise<TaskPushNotificationConfig> {
    const read = await this.read(params.taskId);
    const entry = /^[A-Za-z0-9_-]{1,64}$/.test(params.id)
      ? await this.deps.push.get(PushConfigs.key(this.tenant, this.agent.name, read.task.id, params.id))
      : undefined;
    if (!entry) throw new TaskNotFoundError(`task ${read.task.id} has no push notification config ${params.id}`);
    return configOf(this.tenant, entry.record);
  }

  async listTaskPushNotificationConfigs(
    params: ListTaskPushNotificationConfigsRequest,
    _context: ServerCallContext,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    const read = await this.read(params.taskId);
    const pageSize = params.pageSize || MAX_PUSH_CONFIGS;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) throw new RequestMalformedError("pageSize is 1 to 100");
    const offset = params.pageToken ? offsetOf(params.pageToken) : 0;
    if (offset === undefined) throw new RequestMalformedError("pageToken is a nextPageToken of an earlier page");
    const all = (await this.deps.push.list(PushConfigs.key(this.tenant, this.agent.name, read.task.id, "*")))
      .map((e) => e.record)
      .sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const next = offset + pageSize < all.length ? Buffer.from(String(offset + pageSize)).toString("base64url") : "";
    return { configs: all.slice(offset, offset + pageSize).map((r) => configOf(this.tenant, r)), nextPageToken: next };
  }

  async deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest, _context: ServerCallContext): Promise<void> {
    const read = await this.read(params.taskId);
    const deleted =
      /^[A-Za-z0-9_-]{1,64}$/.test(params.id) && (await this.deps.push.delete(PushConfigs.key(this.tenant, this.agent.name, read.task.id, params.id)));
    if (!deleted) throw new TaskNotFoundError(`task ${read.task.id} has no push notification config ${params.id}`);
  }

  /** The id of the last event the run's journal holds now (null: none yet). */
  private async journalEnd(id: string): Promise<string | null> {
    let cursor: string | null = null;
    for (;;) {
      const page = await this.deps.runs.events(this.tenant, id, { ...(cursor ? { after: cursor } : {}), limit: 1_000 });
      if (page.outcome !== "events") return cursor;
      cursor = page.last ?? cursor;
      if (!page.more) return cursor;
    }
  }

  private pushConfig(taskId: string, settings: PushSettings & { id: string }): PushConfig {
    return {
      id: settings.id,
      task_id: taskId,
      url: settings.url,
      ...(settings.token ? { token: settings.token } : {}),
      ...(settings.authentication ? { authentication: settings.authentication } : {}),
      created_at: this.deps.now(),
    };
  }

  /** A message: a new task (a run started under its id; a resend answers the same task), or an answer to a task that asks for input. */
  private async deliver(params: SendMessageRequest, caller: Caller): Promise<Read>;
  /** With a watch of the task made before: a run it started is not read (its every event is the watch's), the rest is. */
  private async deliver(params: SendMessageRequest, caller: Caller, watched: RunWatch): Promise<Read | Started>;
  private async deliver(params: SendMessageRequest, caller: Caller, watched?: RunWatch): Promise<Read | Started> {
    const message = params.message;
    if (!message?.messageId) throw new RequestMalformedError("a message with a messageId is required");
    if (message.messageId.length > MAX_ID) throw new RequestMalformedError(`messageId is at most ${MAX_ID} characters`);
    if (message.contextId.length > MAX_ID) throw new RequestMalformedError(`contextId is at most ${MAX_ID} characters`);
    const parsed = inputOf(message.parts);
    if (!parsed.ok) throw parsed.unsupported ? new ContentTypeNotSupportedError(parsed.reason) : new RequestMalformedError(parsed.reason);
    const accepted = params.configuration?.acceptedOutputModes ?? [];
    if (accepted.length > 0 && !accepted.some(producible))
      throw new ContentTypeNotSupportedError(`this agent answers in application/json and text/plain, not ${accepted.join(", ")}`);
    const given = params.configuration?.taskPushNotificationConfig;
    const push = given ? pushSettingsOf(given) : undefined;
    if (message.taskId) {
      const answered = await answerTask(this.answers, message, parsed.input, caller);
      if (push) await this.attachPush(answered, { ...push, id: push.id ?? messageConfigId(message.messageId) });
      return answered;
    }
    const deliveryId = `${this.agent.name}/${message.messageId}`;
    const id = runIdFor(this.tenant, startKey("a2a", deliveryId));
    // The record first (one write; a resend finds the first message's): the task is then known whatever the start answers.
    const fresh: TaskRecord = { context_id: message.contextId || randomUUID(), message_id: message.messageId, created_at: this.deps.now() };
    const record = await this.deps.tasks.create(this.tenant, this.agent.name, id, fresh);
    if (record !== fresh) {
      if (record.rejected) return this.read(id, record);
      // A resend: the task is its run's, unless the first message made none (refused as invalid, or cut short): then it starts now.
      if (await this.deps.runs.get(this.tenant, id)) return this.read(id, record);
    }
    if (push) {
      // Stored before the run starts: its delivery begins at the journal's first event.
      const pushId = push.id ?? messageConfigId(message.messageId);
      await this.deps.push.createIfAbsent(
        PushConfigs.key(this.tenant, this.agent.name, id, pushId),
        this.pushConfig(id, { ...push, id: pushId }),
        freshDelivery(null, false),
      );
      this.deps.pushed?.();
    }
    const started = await this.deps.runs.start(
      this.tenant,
      {
        definition: this.agent.definition,
        input: parsed.input,
        start_key: { source: "a2a", delivery_id: deliveryId },
        source: "a2a",
        // A keyed caller is the run's initiator, and its key (not a field it writes) says its lane (C037).
        ...(caller.authenticated ? { initiator: caller.name, granted_lane: caller.interactive ? ("interactive" as const) : ("batch" as const) } : {}),
        ...(caller.trace ? { trace: caller.trace } : {}),
      },
      // This message's record was just created: no run of its key exists yet.
      { newKey: record === fresh },
    );
    if (started.outcome === "started" && watched) return { record };
    if (started.outcome === "started" || started.outcome === "duplicate") return this.read(id, record);
    if (REJECTING.has(started.outcome)) {
      const rejected = { ...record, rejected: { code: started.outcome, at: this.deps.now() } };
      await this.deps.tasks.put(this.tenant, this.agent.name, id, rejected);
      return this.read(id, rejected);
    }
    // Refused as a request: no task either (nor its push config).
    await this.deps.tasks.delete(this.tenant, this.agent.name, id);
    if (push) await this.deps.push.delete(PushConfigs.key(this.tenant, this.agent.name, id, push.id ?? messageConfigId(message.messageId)));
    if (started.outcome === "invalid_input") throw new RequestMalformedError(`the message's input: ${started.reason}`);
    if (started.outcome === "input_too_large") throw new RequestMalformedError(`the message's input is ${started.bytes} bytes, over ${started.limit}`);
    throw new UnsupportedOperationError(`agent ${this.agent.name} cannot start now: ${started.outcome}`);
  }

  /** The task now: its record, its run, and what its run asks a person (the pending approval's request). */
  private async read(id: string, known?: TaskRecord): Promise<Read> {
    if (!id || id.length > MAX_ID || tenantOfRun(id) !== this.tenant) throw new TaskNotFoundError(`no task ${id}`);
    // The record (unless the caller holds it) and the run, side by side: a task without its record is not this agent's.
    const [record, found] = await Promise.all([known ?? this.deps.tasks.get(this.tenant, this.agent.name, id), this.deps.runs.get(this.tenant, id)]);
    if (!record) throw new TaskNotFoundError(`no task ${id}`);
    const view = record.rejected ? undefined : found;
    if (!view && !record.rejected) throw new TaskNotFoundError(`no task ${id}`);
    let ask: unknown;
    if (view && view.waiting?.on === "approval" && view.waiting.ref) {
      const item = await awaitedInboxItem(this.deps.nc, this.tenant, view.waiting.ref);
      if (item) ask = { id: item.id, kind: item.kind, prompt: item.prompt, payload: item.payload, expires_at: item.expires_at };
    }
    return { task: taskOf(id, record, view, ask), record, view };
  }

  /**
   * Waits until the task ends or asks for input (or the watch's bound passes, or the caller goes):
   * the task then. `from` was read, or its run started, after `watch` was made.
   */
  private async waitSettled(id: string, from: Read | Started, watch: RunWatch): Promise<Task> {
    let last = "task" in from ? from.task : undefined;
    for await (const _ of watch.changes("heard")) {
      last = (await this.read(id, from.record)).task;
      if (settled(last.status!.state)) break;
    }
    // Cut short before its first event: the task as it is now.
    return last ?? (await this.read(id, from.record)).task;
  }

  /**
   * The task's changes after `from`, in the order its run made them: its result as an artifact
   * once it succeeded, then each new state, until it ends or comes to ask for input.
   */
  private async *updates(from: Read, signal: AbortSignal): AsyncGenerator<StreamResponse, void, undefined> {
    let last = from.task;
    const id = last.id;
    const streamed = new Set<string>();
    for await (const change of runChanges(this.deps, this.tenant, id, { pollMs: this.deps.pollMs ?? 1_000, signal, text: true })) {
      if (change.kind === "text") {
        // A live token: an artifact per turn of each agent attempt, its pieces appended in order.
        const artifactId = `text/${change.node}/${change.attempt}/${change.turn}`;
        const append = streamed.has(artifactId);
        streamed.add(artifactId);
        const artifact = {
          artifactId,
          name: `${change.node} (turn ${change.turn})`,
          description: "text as the model streams it",
          parts: [textPart(change.text)],
          metadata: undefined,
          extensions: [],
        };
        yield {
          payload: { $case: "artifactUpdate", value: { taskId: id, contextId: last.contextId, artifact, append, lastChunk: false, metadata: undefined } },
        };
        continue;
      }
      const now = (await this.read(id, from.record)).task;
      const state = now.status!.state;
      for (const artifact of now.artifacts) {
        if (last.artifacts.some((a) => a.artifactId === artifact.artifactId)) continue;
        yield {
          payload: { $case: "artifactUpdate", value: { taskId: id, contextId: now.contextId, artifact, append: false, lastChunk: true, metadata: undefined } },
        };
      }
      const changed = state !== last.status!.state || now.status?.message?.messageId !== last.status?.message?.messageId;
      if (changed) yield { payload: { $case: "statusUpdate", value: { taskId: id, contextId: now.contextId, status: now.status, metadata: undefined } } };
      const entered = changed && state === INTERRUPTED;
      last = now;
      if (TERMINAL_STATES.has(state) || entered) return;
    }
  }
}
