import { createHash } from "node:crypto";
import { CancelTaskRequest, GetTaskRequest, SendMessageRequest, TaskState, type Message, type Part, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory, type Client } from "@a2a-js/sdk/client";
import { a2aAuthOf } from "../../machines/index.js";
import type { TaskPollOutcome, ToolCallOutcome, ToolCallRequest, ToolInputRequest, ToolLookup, ToolPort } from "../../actors/index.js";

type ToolResultOutcome = Exclude<ToolCallOutcome, { outcome: "task" | "input_required" }>;

/** The wire an `a2a` node's remote task is kept under in its run (`effect.task`). */
export const A2A_WIRE = "a2a/1.0";
/** A messageId is at most this long (Runway's own agents refuse longer ones): a longer effect key is sent as its SHA-256. */
const MAX_MESSAGE_ID = 200;
/** A fetched card (and the client made from it) is reused this long. */
const DEFAULT_CARD_TTL_MS = 5 * 60_000;
/** How often a remote task is asked how it is doing (a durable timer of the run). */
const DEFAULT_POLL_MS = 1_000;
/** A card fetch, a poll or a cancel that has not answered in this long failed (it is tried again). */
const REQUEST_TIMEOUT_MS = 10_000;

export interface A2ACallerOptions {
  /**
   * Bearer tokens of the remote agents this node's runs call, by `<tenant>/<auth name>`: an `a2a`
   * node's `auth` names one (the definition never holds the token).
   */
  credentials?: Readonly<Record<string, string>>;
  pollMs?: number;
  cardTtlMs?: number;
  now?(): number;
}

type Failure = { outcome: "refused"; code: string; message: string; retryable: boolean };
type Question = Extract<TaskPollOutcome, { outcome: "input_required" }>;

/** The one form a remote task's question is filed as (its answer is `responses.reply`). */
const REPLY = "reply";
/** What an `input_required` poll hands the run to echo with the answer: which task asked which question, and the how-manieth try of answering it. */
interface Asked {
  task: string;
  context: string;
  ask: string;
  n: number;
}

/**
 * The A2A client of `a2a` nodes, as a tool port: a call sends the node's message to the remote
 * agent (the effect key as `messageId`, so a resend after a crash meets the same task), a task
 * not yet ended is waited on by the run's durable poll timer (`GetTask`), and a cancelled run's
 * task is cancelled (`CancelTask`). Every failure is a typed answer, never a throw.
 */
export class A2ACaller {
  private readonly clients = new Map<string, { client: Promise<Client>; at: number }>();

  constructor(private readonly options: A2ACallerOptions = {}) {}

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  lookup(): Promise<ToolLookup> {
    // Idempotent: a resend of the same messageId is the same task (a lost attempt sends again).
    return Promise.resolve({ outcome: "found", class: "idempotent" });
  }

  /** The client for `agent` with the tenant's credential `auth`, from a cached card; or why none. */
  private async clientFor(tenant: string, auth: string | undefined, agent: string): Promise<{ client: Client } | Failure> {
    let token: string | undefined;
    if (auth !== undefined) {
      token = this.options.credentials?.[`${tenant}/${auth}`];
      if (token === undefined)
        return {
          outcome: "refused",
          code: "a2a_credential_not_found",
          message: `this node holds no A2A credential '${auth}' for tenant ${tenant}`,
          retryable: false,
        };
    }
    const key = `${tenant}\n${auth ?? ""}\n${agent}`;
    const cached = this.clients.get(key);
    const ttl = this.options.cardTtlMs ?? DEFAULT_CARD_TTL_MS;
    if (cached && this.now() - cached.at < ttl) {
      const ok = await cached.client.then(
        (client) => client,
        () => undefined,
      );
      if (ok) return { client: ok };
    }
    const fetchImpl = authorizedFetch(token);
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      }),
    );
    const client = factory.createFromUrl(agent, "");
    this.clients.set(key, { client, at: this.now() });
    try {
      return { client: await client };
    } catch (err) {
      this.clients.delete(key);
      return cardFailure(agent, err);
    }
  }

  async call(request: ToolCallRequest): Promise<ToolCallOutcome> {
    const auth = a2aAuthOf(request.server)?.auth;
    const got = await this.clientFor(request.tenant, auth, request.tool);
    if (!("client" in got)) return got;
    if (request.input) return this.answer(request, got.client, request.input);
    const message = request.arguments;
    const messageId = request.key.length <= MAX_MESSAGE_ID ? request.key : createHash("sha256").update(request.key).digest("hex");
    const send = SendMessageRequest.fromJSON({
      message: { messageId, role: "ROLE_USER", parts: [typeof message === "string" ? { text: message } : { data: message ?? null }] },
      configuration: { returnImmediately: true },
    });
    let answer: Task | Message;
    try {
      answer = await got.client.sendMessage(send, { signal: AbortSignal.any([request.signal, AbortSignal.timeout(request.timeoutMs)]) });
    } catch (err) {
      return sendFailure(request.tool, err);
    }
    if (!("status" in answer)) return settled({ message: partsOf(answer.parts), context: answer.contextId || null });
    const ended = endOf(answer);
    if (ended) return ended;
    return { outcome: "task", taskId: answer.id, pollMs: this.options.pollMs ?? DEFAULT_POLL_MS, wire: A2A_WIRE };
  }

  async pollTask(tenant: string, server: string, taskId: string, _wire: string, agent?: string): Promise<TaskPollOutcome> {
    if (agent === undefined) return { outcome: "unknown", code: "a2a_agent_unknown", message: "the task's agent is not recorded" };
    const got = await this.clientFor(tenant, a2aAuthOf(server)?.auth, agent);
    if (!("client" in got)) return got.retryable ? { outcome: "unknown", code: got.code, message: got.message } : got;
    let task: Task;
    try {
      task = await got.client.getTask(GetTaskRequest.fromJSON({ id: taskId, historyLength: 0 }), { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    } catch (err) {
      const failed = sendFailure(agent, err);
      // The task is gone: it will not end. Anything else (unreachable, a fault): asked again at the next poll.
      return failed.outcome === "refused" && failed.code === "a2a_task_not_found" ? failed : { outcome: "unknown", code: failed.code, message: failed.message };
    }
    if (task.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) return questionOf(task, agent, 0);
    return endOf(task) ?? { outcome: "working" };
  }

  /**
   * A person answered the remote task's question (the attempt after the run filed it): a decline
   * cancels the task; an answer is a follow-up message on the task (its `taskId` and `contextId`),
   * its messageId derived from the effect key and the question, so a resend after a crash is the
   * same message. An agent that refuses the answer while its task still asks has the person asked
   * again, told why; a task that ended meanwhile ends the step as it ended; otherwise the task is
   * waited on again.
   */
  private async answer(request: ToolCallRequest, client: Client, input: NonNullable<ToolCallRequest["input"]>): Promise<ToolCallOutcome> {
    const asked = askedOf(input.state);
    if (!asked) return { outcome: "refused", code: "a2a_input_state_invalid", message: "the answer carries no remote task to follow up", retryable: false };
    const reply = input.responses[REPLY];
    const action = isRecord(reply) ? reply.action : undefined;
    if (action !== "accept") {
      await client.cancelTask(CancelTaskRequest.fromJSON({ id: asked.task }), { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).catch(() => undefined);
      return {
        outcome: "refused",
        code: "a2a_input_rejected",
        message: `a person declined the question of remote task ${asked.task}; the task was cancelled`,
        retryable: false,
      };
    }
    const content = isRecord(reply) ? reply.content : undefined;
    const messageId = createHash("sha256").update(`${request.key}\ninput\n${asked.ask}\n${asked.n}`).digest("hex");
    const send = SendMessageRequest.fromJSON({
      message: { messageId, taskId: asked.task, contextId: asked.context, role: "ROLE_USER", parts: [replyPart(content)] },
      configuration: { returnImmediately: true },
    });
    let answer: Task | Message;
    try {
      answer = await client.sendMessage(send, { signal: AbortSignal.any([request.signal, AbortSignal.timeout(request.timeoutMs)]) });
    } catch (err) {
      const failed = sendFailure(request.tool, err);
      if (failed.outcome !== "refused" || failed.retryable) return failed;
      // Refused: the answer did nothing. A task that still asks is asked of the person again, with the agent's reason.
      const task = await client
        .getTask(GetTaskRequest.fromJSON({ id: asked.task, historyLength: 0 }), { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
        .catch(() => undefined);
      // The task moved on meanwhile (answered at the agent, ended there): the step takes its end.
      if (task?.status?.state !== TaskState.TASK_STATE_INPUT_REQUIRED) return (task && endOf(task)) ?? failed;
      const again = questionOf(task, request.tool, asked.n + 1);
      const why = `${request.tool} refused the answer (${failed.code}: ${failed.message.slice(0, 1_000)})`;
      return { ...again, requests: again.requests.map((r) => ({ ...r, message: `${why}\n${r.message}`.slice(0, MAX_QUESTION) })) };
    }
    if (!("status" in answer)) return settled({ message: partsOf(answer.parts), context: answer.contextId || null });
    return endOf(answer) ?? { outcome: "task", taskId: answer.id, pollMs: this.options.pollMs ?? DEFAULT_POLL_MS, wire: A2A_WIRE };
  }

  async cancelTask(tenant: string, server: string, taskId: string, _wire: string, agent?: string): Promise<void> {
    if (agent === undefined) return;
    const got = await this.clientFor(tenant, a2aAuthOf(server)?.auth, agent);
    if (!("client" in got)) return;
    await got.client.cancelTask(CancelTaskRequest.fromJSON({ id: taskId }), { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).catch(() => undefined);
  }
}

/** A tool port that sends `a2a` nodes' calls (server `a2a:<auth>`) to `a2a`, and every other call to `tools`. */
export function withA2A(tools: ToolPort | undefined, a2a: A2ACaller): ToolPort {
  const none = { outcome: "unavailable" as const, code: "tool_gateway_unavailable", message: "this node has no tool gateway" };
  const isA2A = (server: string) => a2aAuthOf(server) !== undefined;
  return {
    lookup: (tenant, server, tool) => (isA2A(server) ? a2a.lookup() : (tools?.lookup(tenant, server, tool) ?? Promise.resolve(none))),
    call: (r) =>
      isA2A(r.server) ? a2a.call(r) : (tools?.call(r) ?? Promise.resolve({ outcome: "refused", code: none.code, message: none.message, retryable: true })),
    pollTask: (tenant, server, id, wire, tool) =>
      isA2A(server)
        ? a2a.pollTask(tenant, server, id, wire, tool)
        : (tools?.pollTask(tenant, server, id, wire, tool) ?? Promise.resolve({ outcome: "working" })),
    cancelTask: (tenant, server, id, wire, tool) =>
      isA2A(server) ? a2a.cancelTask(tenant, server, id, wire, tool) : (tools?.cancelTask(tenant, server, id, wire, tool) ?? Promise.resolve()),
  };
}

/** `fetch` with the bearer token (when there is one) and a deadline unless the caller gave a signal. */
function authorizedFetch(token: string | undefined): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    if (token !== undefined) headers.set("Authorization", `Bearer ${token}`);
    return fetch(input, { ...init, headers, signal: init?.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  };
}

/** A task's end as the step sees it: its result (completed), a typed failure, or undefined while it goes on. */
function endOf(task: Task): ToolResultOutcome | undefined {
  const state = task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED;
  const said = partsOf(task.status?.message?.parts ?? [])
    .filter((p): p is string => typeof p === "string")
    .join("\n")
    .slice(0, 1_024);
  const because = said ? `: ${said}` : "";
  switch (state) {
    case TaskState.TASK_STATE_COMPLETED: {
      const artifacts = task.artifacts.map((a) => ({ id: a.artifactId, ...(a.name ? { name: a.name } : {}), parts: partsOf(a.parts) }));
      const main = artifacts.find((a) => a.id === "result" || a.name === "result") ?? artifacts[0];
      const result = main === undefined ? null : main.parts.length === 1 ? main.parts[0] : main.parts;
      return settled({ task: task.id, context: task.contextId || null, result: result ?? null, artifacts });
    }
    case TaskState.TASK_STATE_FAILED:
      return { outcome: "refused", code: "a2a_task_failed", message: `remote task ${task.id} failed${because}`, retryable: false };
    case TaskState.TASK_STATE_REJECTED:
      return { outcome: "refused", code: "a2a_task_rejected", message: `remote task ${task.id} was rejected${because}`, retryable: false };
    case TaskState.TASK_STATE_CANCELED:
      return { outcome: "refused", code: "a2a_task_canceled", message: `remote task ${task.id} was canceled${because}`, retryable: false };
    case TaskState.TASK_STATE_AUTH_REQUIRED:
      return { outcome: "refused", code: "a2a_auth_required", message: `remote task ${task.id} asks for authentication${because}`, retryable: false };
    default:
      // Submitted, working (input-required is a question: see questionOf): still going.
      return undefined;
  }
}

/** A question's text is at most this long (the run's request for input keeps 4 KiB). */
const MAX_QUESTION = 4_096;
/** A question's answer schema is kept up to this many characters of JSON. */
const MAX_SCHEMA = 16_384;

/**
 * A remote task in `input-required` as a request for a person: its status message's text parts
 * (or, with none, its data), and the JSON schema of the answer when the message carries one (a
 * data part's `schema`, or a Runway agent's request for input with one form); no schema: any
 * answer. `n`: how many answers to this question the agent refused so far.
 */
function questionOf(task: Task, agent: string, n: number): Question {
  const message = task.status?.message;
  const values = partsOf(message?.parts ?? []);
  const text = values.filter((v): v is string => typeof v === "string").join("\n");
  const data = values.filter(isRecord);
  const prompt = text || (data.length > 0 ? JSON.stringify(data.length === 1 ? data[0] : data) : `${agent} asks for input`);
  const found = data.map(schemaIn).find((x) => x !== undefined);
  // A schema past its bound is not kept (any answer then; the agent still checks its own).
  const schema = found && JSON.stringify(found).length <= MAX_SCHEMA ? found : {};
  // The question's identity: its message's id, or (none) its content.
  const ask = message?.messageId || createHash("sha256").update(JSON.stringify(values)).digest("hex").slice(0, 32);
  const asked: Asked = { task: task.id, context: task.contextId, ask, n };
  const requests: ToolInputRequest[] = [{ key: REPLY, message: prompt.slice(0, MAX_QUESTION), schema }];
  return { outcome: "input_required", requests, state: JSON.stringify(asked), task: { id: task.id, wire: A2A_WIRE } };
}

/** The answer's schema a data part carries: its `schema`, or a Runway agent's one form's (`request.payload.requests[0].schema`). */
function schemaIn(data: Record<string, unknown>): Record<string, unknown> | undefined {
  if (isRecord(data.schema)) return data.schema;
  const request = data.request;
  if (!isRecord(request) || request.kind !== "input" || !isRecord(request.payload)) return undefined;
  const forms = request.payload.requests;
  return Array.isArray(forms) && forms.length === 1 && isRecord(forms[0]) && isRecord(forms[0].schema) ? forms[0].schema : undefined;
}

/** The state an `input_required` poll gave the run, decoded (undefined: not one). */
function askedOf(state: string | undefined): Asked | undefined {
  let v: unknown;
  try {
    v = JSON.parse(state ?? "");
  } catch {
    return undefined;
  }
  if (!isRecord(v) || typeof v.task !== "string" || !v.task || typeof v.context !== "string" || typeof v.ask !== "string" || typeof v.n !== "number")
    return undefined;
  return { task: v.task, context: v.context, ask: v.ask, n: v.n };
}

/** The answer's part: text for a string, "approved" for no content (a yes), one data part otherwise. */
function replyPart(content: unknown): { text: string } | { data: unknown } {
  if (typeof content === "string") return { text: content };
  if (content === undefined || content === null || (isRecord(content) && Object.keys(content).length === 0)) return { text: "approved" };
  return { data: content };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function settled(value: unknown): ToolResultOutcome {
  return { outcome: "ok", result: { structuredContent: value }, bytes: Buffer.byteLength(JSON.stringify(value)) };
}

/** A part as a plain JSON value: its text, its data, its URL, or its bytes in base64. */
function partsOf(parts: Part[]): unknown[] {
  return parts.map((p) => {
    const c = p.content;
    if (!c) return null;
    if (c.$case === "raw") return { raw: Buffer.from(c.value).toString("base64"), ...(p.mediaType ? { media_type: p.mediaType } : {}) };
    if (c.$case === "url") return { url: c.value };
    return c.value ?? null;
  });
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 1_024);
}

/** A card that could not be had: nothing was sent. */
function cardFailure(agent: string, err: unknown): Failure {
  const message = messageOf(err);
  const status = /Failed to fetch Agent Card from .*: (\d{3})$/.exec(message)?.[1];
  if (status === "404") return { outcome: "refused", code: "a2a_agent_not_found", message: `no agent card at ${agent}`, retryable: false };
  if (status === "401" || status === "403")
    return { outcome: "refused", code: "a2a_unauthorized", message: `${agent} refused the card's request (${status})`, retryable: false };
  if (status !== undefined) return { outcome: "refused", code: "a2a_agent_unavailable", message: `${agent} answered ${status}`, retryable: true };
  if (err instanceof TypeError && /fetch failed|abort|timeout/i.test(message))
    return { outcome: "refused", code: "a2a_agent_unreachable", message: `cannot reach ${agent}: ${causeOf(err)}`, retryable: true };
  if (/abort|timeout/i.test(message)) return { outcome: "refused", code: "a2a_agent_unreachable", message: `${agent} did not answer in time`, retryable: true };
  return { outcome: "refused", code: "a2a_card_invalid", message: `the agent card at ${agent} is not usable: ${message}`, retryable: false };
}

/**
 * A send (or a poll) that did not answer a task: the agent's A2A error is a refusal (nothing
 * happened: `a2a_<reason>`), a broken connection leaves the outcome unknown (the same messageId
 * is sent again, which meets the same task).
 */
function sendFailure(agent: string, err: unknown): Failure | { outcome: "unknown"; code: string; message: string } {
  const reason = typeof err === "object" && err !== null && "reason" in err && typeof err.reason === "string" ? err.reason : undefined;
  const message = messageOf(err);
  if (reason && /^[A-Z_]{1,64}$/.test(reason)) {
    const code = `a2a_${reason.toLowerCase()}`;
    const retryable = /INTERNAL|UNAVAILABLE|UNKNOWN/.test(reason);
    return { outcome: "refused", code, message: `${agent}: ${message}`, retryable };
  }
  if (/\b401\b|\b403\b|unauthori[sz]ed|UNAUTHENTICATED|PERMISSION_DENIED/i.test(message))
    return { outcome: "refused", code: "a2a_unauthorized", message: `${agent} refused the caller: ${message}`, retryable: false };
  return { outcome: "unknown", code: "a2a_agent_unreachable", message: `${agent}: ${err instanceof TypeError ? causeOf(err) : message}` };
}

function causeOf(err: Error): string {
  return err.cause instanceof Error ? err.cause.message : err.message;
}
