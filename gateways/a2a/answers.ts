import type { NatsConnection } from "@nats-io/transport-node";
import { TaskState, type Message, type Task } from "@a2a-js/sdk";
import { RequestMalformedError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import { getInboxItem, type DefinitionStore, type RunView } from "../../actors/index.js";
import type { RunService } from "../api/run-service.js";
import { decisionRefusal } from "../api/callers.js";
import { notAuthorized, type Caller } from "./caller.js";
import { TERMINAL_STATES, type TaskRecord, type TaskRecords } from "./tasks.js";

const INTERRUPTED = TaskState.TASK_STATE_INPUT_REQUIRED;
/** Answers to a task's questions whose ids are kept, for resends. */
const ANSWERS_KEPT = 16;

/** A task as read now, with its run. */
export interface TaskRead {
  task: Task;
  record: TaskRecord;
  view: RunView | undefined;
}

/** What answering a task's question needs of its agent's handler. */
export interface AnswerContext {
  nc: NatsConnection;
  runs: RunService;
  definitions: DefinitionStore;
  tasks: TaskRecords;
  tenant: string;
  /** The exposed agent's name. */
  agent: string;
  read(id: string, known?: TaskRecord): Promise<TaskRead>;
}

/**
 * A follow-up message on a task that asks for input: it decides the run's pending approval (a
 * data part `{decision, payload?, reason?}`, or text: "no", "reject", "deny" or "decline"
 * rejects, anything else approves; a request for input takes the message's input as the
 * form's content), or it is the signal the run waits for (the message's input as its data).
 */
export async function answerTask(ctx: AnswerContext, message: Message, input: Record<string, unknown>, caller: Caller): Promise<TaskRead> {
  const read = await ctx.read(message.taskId);
  if (message.contextId && message.contextId !== read.record.context_id) throw new RequestMalformedError("contextId is not the task's");
  // A resend of an answer already given answers the task, whatever it does now.
  if (read.record.answers?.includes(message.messageId)) return read;
  const state = read.task.status!.state;
  if (state !== INTERRUPTED || !read.view?.waiting?.ref)
    throw new UnsupportedOperationError(
      TERMINAL_STATES.has(state) ? `task ${read.task.id} ended: send a new message` : `task ${read.task.id} takes no message now`,
    );
  const by = caller.by;
  const { ref, on } = read.view.waiting;
  if (on === "event") {
    const name = await signalOf(ctx, read.view, ref);
    if (!name) throw new UnsupportedOperationError(`task ${read.task.id} waits on nothing a message answers`);
    const { text: _text, ...data } = input;
    const signalled = await ctx.runs.signal(ctx.tenant, read.task.id, { name, data: Object.keys(data).length > 0 ? data : input, by });
    if (signalled.outcome === "invalid_input") throw new RequestMalformedError(`the signal's data: ${signalled.reason ?? "refused"}`);
    return answered(ctx, read, message.messageId);
  }
  const item = await getInboxItem(ctx.nc, ctx.tenant, ref);
  const text = typeof input.text === "string" ? input.text.trim() : undefined;
  const named = input.decision === "approve" || input.decision === "reject" || input.decision === "edit" ? input.decision : undefined;
  const decision = named ?? (text && /^(no|reject(ed)?|deny|denied|decline(d)?)\b/i.test(text) ? "reject" : "approve");
  // A keyed caller's decision is checked against the approval it reads: one not readable yet is not decided unchecked.
  if (!item && caller.authenticated) throw new UnsupportedOperationError(`the question of task ${read.task.id} is not readable now; send again`);
  // A public agent's anonymous callers are not checked: exposing it without keys is an explicit per-agent choice.
  const refused =
    item && caller.authenticated ? decisionRefusal({ identity: caller.name, groups: caller.groups }, item, read.view.initiator, decision) : undefined;
  if (refused) throw notAuthorized(refused);
  const { decision: _d, reason, payload, ...rest } = input;
  const content = payload ?? (item?.kind === "input" && decision === "approve" ? rest : undefined);
  const decided = await ctx.runs.decide(ctx.tenant, ref, {
    decision,
    ...(content !== undefined ? { payload: content } : {}),
    ...(typeof reason === "string" ? { reason } : text ? { reason: text } : {}),
    by,
  });
  if (decided.outcome === "invalid_input") throw new RequestMalformedError(`the decision: ${decided.reason}`);
  if (decided.outcome === "approval_expired") throw new UnsupportedOperationError(`the approval of task ${read.task.id} expired`);
  return answered(ctx, read, message.messageId);
}

/** Notes the message that answered the task (the last few are kept: a resend of one answers the task), and reads the task. */
async function answered(ctx: AnswerContext, read: TaskRead, messageId: string): Promise<TaskRead> {
  const answers = [...(read.record.answers ?? []), messageId].slice(-ANSWERS_KEPT);
  const record = { ...read.record, answers };
  await ctx.tasks.put(ctx.tenant, ctx.agent, read.task.id, record);
  return ctx.read(read.task.id, record);
}

/** The signal a `wait` node waits for, from the run's plan. */
async function signalOf(ctx: AnswerContext, view: RunView, node: string): Promise<string | undefined> {
  const plan = (await ctx.definitions.planOf(view.definition.digest)).plan;
  const n = plan.nodes.find((x) => x.id === node) as { signal?: string } | undefined;
  return n?.signal;
}
