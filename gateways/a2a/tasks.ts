import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { Role, TaskState, type Artifact, type Message, type Part, type Task } from "@a2a-js/sdk";
import { lastValues, type RunView } from "../../actors/index.js";

import { TASKS_BUCKET } from "./agents.js";

/**
 * What a task keeps beside its run: the conversation it belongs to, the message that started it,
 * and, for a start its tenant refused (no run exists), the refusal.
 */
export interface TaskRecord {
  context_id: string;
  message_id: string;
  created_at: number;
  rejected?: { code: string; at: number };
  /** The ids of the last follow-up messages that answered the task's questions. */
  answers?: string[];
}

export class TaskRecords {
  private kv: Promise<KV> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  private bucket(): Promise<KV> {
    return (this.kv ??= new Kvm(this.nc).open(TASKS_BUCKET));
  }

  async get(tenant: string, agent: string, id: string): Promise<TaskRecord | undefined> {
    const e = await (await this.bucket()).get(`${tenant}.${agent}.${id}`);
    return e && e.operation === "PUT" && e.length > 0 ? e.json<TaskRecord>() : undefined;
  }

  /** Stores the record unless one is there: the first message's record stands (a resend answers the same task). */
  async create(tenant: string, agent: string, id: string, record: TaskRecord): Promise<TaskRecord> {
    try {
      await (await this.bucket()).create(`${tenant}.${agent}.${id}`, JSON.stringify(record));
      return record;
    } catch (err) {
      const stored = await this.get(tenant, agent, id);
      if (stored) return stored;
      throw err;
    }
  }

  async put(tenant: string, agent: string, id: string, record: TaskRecord): Promise<void> {
    await (await this.bucket()).put(`${tenant}.${agent}.${id}`, JSON.stringify(record));
  }

  async delete(tenant: string, agent: string, id: string): Promise<void> {
    await (await this.bucket()).delete(`${tenant}.${agent}.${id}`);
  }

  /** Every task of an agent with its record. */
  async list(tenant: string, agent: string): Promise<{ id: string; record: TaskRecord }[]> {
    await this.bucket();
    const prefix = `${tenant}.${agent}.`;
    return (await lastValues(this.nc, TASKS_BUCKET, `${prefix}*`))
      .filter((v) => v.data.length > 0)
      .map((v) => ({ id: v.key.slice(prefix.length), record: JSON.parse(new TextDecoder().decode(v.data)) as TaskRecord }));
  }
}

/** A part's content as the run's input takes it: JSON data, or text. Files and URLs are not taken. */
export type InputOf = { ok: true; input: Record<string, unknown> } | { ok: false; unsupported: boolean; reason: string };

const TEXT_TYPES = /^(text\/[a-z0-9.+-]+|application\/json|application\/[a-z0-9.+-]+\+json)$/i;

/**
 * A message's parts as a run's input: data parts (objects) are merged into the input, a data part
 * that is not an object is `{ data }`; text parts, joined by a newline, are its `text`. Files
 * (raw bytes or URLs) answer ContentTypeNotSupported: nothing reads them.
 */
export function inputOf(parts: readonly Part[]): InputOf {
  if (parts.length === 0) return { ok: false, unsupported: false, reason: "a message carries at least one part" };
  const input: Record<string, unknown> = {};
  const texts: string[] = [];
  for (const part of parts) {
    if (part.mediaType && !TEXT_TYPES.test(part.mediaType))
      return { ok: false, unsupported: true, reason: `parts of media type ${part.mediaType} are not taken (text and JSON data only)` };
    const c = part.content;
    if (!c) return { ok: false, unsupported: false, reason: "a part carries text, data, raw bytes or a url" };
    if (c.$case === "text") texts.push(c.value);
    else if (c.$case === "data") {
      const data: unknown = c.value;
      if (data !== null && typeof data === "object" && !Array.isArray(data)) Object.assign(input, data);
      else input.data = data;
    } else return { ok: false, unsupported: true, reason: `${c.$case} parts are not taken (text and JSON data only)` };
  }
  if (texts.length > 0) input.text = texts.join("\n");
  return { ok: true, input };
}

export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

/** A run's state as its task's: queued and running work; a person is waited on (approval, input, signal): input is required. */
export function stateOf(view: RunView): TaskState {
  switch (view.status) {
    case "succeeded":
      return TaskState.TASK_STATE_COMPLETED;
    case "failed":
      return TaskState.TASK_STATE_FAILED;
    case "cancelled":
      return TaskState.TASK_STATE_CANCELED;
    case "waiting":
      return view.waiting?.on === "approval" || view.waiting?.on === "event" ? TaskState.TASK_STATE_INPUT_REQUIRED : TaskState.TASK_STATE_WORKING;
    default:
      return TaskState.TASK_STATE_WORKING;
  }
}

export function textPart(text: string): Part {
  return { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" };
}

export function dataPart(value: unknown): Part {
  return { content: { $case: "data", value }, metadata: undefined, filename: "", mediaType: "application/json" };
}

export function agentMessage(taskId: string, contextId: string, messageId: string, parts: Part[]): Message {
  return { messageId, contextId, taskId, role: Role.ROLE_AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] };
}

/** The run's result as the task's one artifact (`result`): text for a string, JSON data otherwise. */
export function resultArtifact(view: RunView): Artifact | undefined {
  if (view.status !== "succeeded" || view.result === undefined || view.result === null) return undefined;
  return {
    artifactId: "result",
    name: "result",
    description: view.result_truncated ? "the run's result, cut to its bound" : "the run's result",
    parts: [typeof view.result === "string" ? textPart(view.result) : dataPart(view.result)],
    metadata: undefined,
    extensions: [],
  };
}

/** What a person is asked, for an input-required task's status message (`ask`), or why a run failed or was cancelled. */
function statusMessage(taskId: string, contextId: string, view: RunView, ask: unknown): Message | undefined {
  const state = stateOf(view);
  if (state === TaskState.TASK_STATE_INPUT_REQUIRED) {
    const prompt = (ask as { prompt?: string } | undefined)?.prompt;
    return agentMessage(taskId, contextId, `${taskId}/ask/${view.waiting?.ref ?? ""}`, [
      textPart(prompt ?? (view.waiting?.on === "event" ? "the run waits for a signal" : "the run waits for a decision")),
      dataPart({ waiting: view.waiting, ...(ask !== undefined ? { request: ask } : {}) }),
    ]);
  }
  if (state === TaskState.TASK_STATE_FAILED || state === TaskState.TASK_STATE_CANCELED) {
    const why = (view.error ?? view.cancel) as { message?: string; reason?: string } | null;
    const text = why?.message ?? why?.reason ?? view.status;
    return agentMessage(taskId, contextId, `${taskId}/${view.status}`, [textPart(text), dataPart({ error: view.error ?? null, cancel: view.cancel ?? null })]);
  }
  return undefined;
}

function isoOf(ms: number | null | undefined): string | undefined {
  return ms ? new Date(ms).toISOString() : undefined;
}

/** The task a run is: its state, what it asks or why it ended, and its result as an artifact. */
export function taskOf(id: string, record: TaskRecord, view: RunView | undefined, ask?: unknown): Task {
  if (!view) {
    const state = record.rejected ? TaskState.TASK_STATE_REJECTED : TaskState.TASK_STATE_SUBMITTED;
    const message = record.rejected ? agentMessage(id, record.context_id, `${id}/rejected`, [textPart(record.rejected.code)]) : undefined;
    return {
      id,
      contextId: record.context_id,
      status: { state, message, timestamp: isoOf(record.rejected?.at ?? record.created_at) },
      artifacts: [],
      history: [],
      metadata: undefined,
    };
  }
  const artifact = resultArtifact(view);
  return {
    id,
    contextId: record.context_id,
    status: {
      state: stateOf(view),
      message: statusMessage(id, record.context_id, view, ask),
      timestamp: isoOf(statusTime(view)),
    },
    artifacts: artifact ? [artifact] : [],
    history: [],
    metadata: { run: { status: view.status, definition: view.definition } },
  };
}

/** When the run's state last changed, as far as its summary tells. */
export function statusTime(view: RunView): number {
  return view.ended_at ?? view.started_at ?? view.created_at;
}
