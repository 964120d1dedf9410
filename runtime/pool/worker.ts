/**
 * The Piscina worker of a StepPool. Loaded once per thread; imports the handler modules once
 * (at load, so that a replacement thread is warm before it takes work) and runs a batch of
 * steps per task, side by side. It never throws to Piscina: every step's outcome is a
 * StepOutcome, so that a Piscina-level rejection always means the thread itself failed.
 */
import { BroadcastChannel, parentPort, workerData } from "node:worker_threads";
import { isStepError, ToolError, type Handler, type StepContext } from "./handler-api.js";
import {
  WIRE_VERSION,
  isWire,
  jsonProblem,
  loadHandlerModules,
  type CancelMessage,
  type EventMessage,
  type FailureCode,
  type InitMessage,
  type ReadyMessage,
  type BatchMessage,
  type ResultsMessage,
  type RunMessage,
  type StepOutcome,
  type TaskMessage,
  type ToolAnswerMessage,
  type ToolCallAnswer,
  type ToolCallMessage,
  type WorkerConfig,
} from "./wire.js";

const config = workerData as WorkerConfig | undefined;
if (!parentPort || config?.v !== WIRE_VERSION) {
  throw new Error("runtime/pool/worker.ts must be started by StepPool (missing or incompatible workerData)");
}
const port = parentPort;

const loading: Promise<Map<string, Handler>> = loadHandlerModules(config.handlerModules);
loading.catch(() => undefined); // reported per task; never an unhandled rejection

/** Cancellation state of the running task(s); the AbortController is created on first use. */
interface Running {
  controller?: AbortController;
  reason?: "timeout" | "aborted";
}
const running = new Map<number, Running>();

/** Tool calls waiting for their answer, by `<seq>/<id>`. */
const toolCalls = new Map<string, (answer: ToolCallAnswer) => void>();
let nextToolCall = 0;

const control = new BroadcastChannel(config.channel);
control.onmessage = (event: unknown) => {
  const msg = (event as { data?: unknown }).data;
  if (isWire<ToolAnswerMessage>(msg, "tool_answer")) {
    const key = `${msg.seq}/${msg.id}`;
    toolCalls.get(key)?.(msg.answer);
    toolCalls.delete(key);
    return;
  }
  if (!isWire<CancelMessage>(msg, "cancel")) return;
  const r = running.get(msg.seq);
  if (!r || r.reason) return;
  r.reason = msg.reason;
  r.controller?.abort(cancelReason(msg.reason));
};
control.unref();

function cancelReason(reason: "timeout" | "aborted"): Error {
  const err = new Error(reason === "timeout" ? "step timed out" : "step was cancelled");
  err.name = reason === "timeout" ? "TimeoutError" : "AbortError";
  return err;
}

function fail(seq: number, code: FailureCode, message: string, retryable: boolean, events: number): StepOutcome {
  return { t: "fail", seq, code, message, retryable, events };
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.name && err.name !== "Error" ? `${err.name}: ${err.message}` : err.message;
  if (typeof err === "object" && err !== null && typeof (err as { message?: unknown }).message === "string") {
    return (err as { message: string }).message;
  }
  try {
    return String(err);
  } catch {
    return "a value that cannot be printed was thrown";
  }
}

async function runStep(msg: RunMessage): Promise<StepOutcome> {
  let handlers: Map<string, Handler>;
  try {
    handlers = await loading;
  } catch (err) {
    return fail(msg.seq, "worker_crashed", describe(err), true, 0);
  }
  const handler = handlers.get(msg.handler);
  if (!handler) return fail(msg.seq, "unknown_handler", `no handler named "${msg.handler}"`, false, 0);
  // Checked as late as can be: a process paused between the hand-off and here must not start what its caller gave up.
  if (msg.startBy !== undefined && Date.now() > msg.startBy)
    return fail(msg.seq, "late_start", "the step's start deadline passed before a thread took it", true, 0);

  const state: Running = {};
  running.set(msg.seq, state);
  let events = 0;
  let done = false;
  const post = (m: EventMessage) => {
    if (done) return; // a leaked timer of a finished step talks to nobody
    port.postMessage(m); // throws DataCloneError to the handler for uncloneable progress data
    events++;
  };
  const ctx: StepContext = {
    input: msg.input,
    runId: msg.runId,
    stepId: msg.stepId,
    attempt: msg.attempt,
    leaseEpoch: msg.leaseEpoch,
    get signal(): AbortSignal {
      if (!state.controller) {
        state.controller = new AbortController();
        if (state.reason) state.controller.abort(cancelReason(state.reason));
      }
      return state.controller.signal;
    },
    heartbeat: () => post({ t: "heartbeat", v: WIRE_VERSION, seq: msg.seq }),
    progress: (data: unknown) => post({ t: "progress", v: WIRE_VERSION, seq: msg.seq, data }),
    tools: {
      call: async (server, tool, args = {}) => {
        if (done) throw new ToolError("stopped", "the step has ended", false);
        const id = nextToolCall++;
        const answer = new Promise<ToolCallAnswer>((resolve) => toolCalls.set(`${msg.seq}/${id}`, resolve));
        port.postMessage({ t: "tool_call", v: WIRE_VERSION, seq: msg.seq, id, server, tool, arguments: args } satisfies ToolCallMessage);
        const a = await answer;
        if (a.outcome === "succeeded") return a.output;
        if (a.outcome === "stopped") throw new ToolError("stopped", `the run no longer wants this attempt (${a.reason})`, false);
        throw new ToolError(a.error.code, a.error.message, a.error.retryable);
      },
    },
  };

  try {
    const output = await handler(ctx);
    done = true;
    if (output === undefined) return { t: "ok", seq: msg.seq, output: null, events };
    const problem = jsonProblem(output);
    if (problem !== undefined) return fail(msg.seq, "bad_output", `handler "${msg.handler}" returned bad output: ${problem}`, false, events);
    return { t: "ok", seq: msg.seq, output, events };
  } catch (err) {
    done = true;
    if (isStepError(err)) return fail(msg.seq, err.kind, String(err.message), err.kind === "retryable", events);
    return fail(msg.seq, "handler_error", describe(err), true, events);
  } finally {
    done = true;
    running.delete(msg.seq);
  }
}

async function init(): Promise<ReadyMessage> {
  const handlers = await loading; // a failure rejects the probe: StepPool.start() reports it
  return { t: "ready", v: WIRE_VERSION, handlers: [...handlers.keys()] };
}

/**
 * Runs a batch's steps side by side. The task answers once every step ended, with the results
 * not posted yet; a step that ends while others run is posted on the parent port at the end of
 * this turn of the loop, with any that ended in the same turn, so that it does not wait for a
 * slow sibling.
 */
function runBatch(batch: BatchMessage): Promise<ResultsMessage> {
  if (batch.steps.length === 1) return runOne(batch.steps[0]!);
  return new Promise((resolve) => {
    let left = batch.steps.length;
    let ended: StepOutcome[] = [];
    let posting = false;
    const postEnded = () => {
      posting = false;
      if (ended.length === 0) return;
      port.postMessage({ t: "results", v: WIRE_VERSION, results: ended } satisfies ResultsMessage);
      ended = [];
    };
    const onEnd = (outcome: StepOutcome) => {
      ended.push(outcome);
      if (--left === 0) {
        resolve({ t: "results", v: WIRE_VERSION, results: ended });
        ended = [];
      } else if (!posting) {
        posting = true;
        setImmediate(postEnded);
      }
    };
    for (const step of batch.steps) void outcomeOf(step).then(onEnd);
  });
}

/** A batch of one (what an idle pool sends): its result is the answer. */
async function runOne(step: RunMessage): Promise<ResultsMessage> {
  return { t: "results", v: WIRE_VERSION, results: [await outcomeOf(step)] };
}

/** A step's outcome, whatever happens: a fault outside the handler's own try is `worker_crashed`. */
function outcomeOf(step: RunMessage): Promise<StepOutcome> {
  return runStep(step).catch((err: unknown) => fail(step.seq, "worker_crashed", describe(err), true, 0));
}

/** Piscina's entry point. */
export default function task(msg: TaskMessage): Promise<ResultsMessage | ReadyMessage> {
  if (isWire<BatchMessage>(msg, "batch")) return runBatch(msg);
  if (isWire<InitMessage>(msg, "init")) return init();
  return Promise.resolve({ t: "results", v: WIRE_VERSION, results: [] });
}
