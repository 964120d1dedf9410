import type { TaskPoll } from "../../machines/index.js";
import { RUN_KIND, refsWritten, settleCall, toolResult, type BoundedRef, type ToolPort } from "../run/index.js";

/** What a task poll needs of the node: the tool gateway, the result bound, the clock and the executor's report path. */
export interface TaskPollDeps {
  tools: ToolPort;
  bounded(ref: BoundedRef, output: unknown): Promise<unknown>;
  now(): number;
  send(address: { kind: string; id: string }, event: Record<string, unknown>, id: string): Promise<unknown>;
}

/**
 * A task poll is due (the run's durable timer fired): asks the server, and when the task ended
 * reports its result as the attempt's (fenced by its attempt and lease epoch, with the receipt);
 * a task that asks a person (A2A `input-required`) goes to the run as the attempt's request for
 * input. A task still working, or a server that cannot be asked now, costs nothing: the next
 * timer asks again.
 */
export async function pollTask(deps: TaskPollDeps, p: TaskPoll): Promise<void> {
  const { tools } = deps;
  const polled = await tools.pollTask(p.tenant, p.task.server, p.task.id, p.task.wire, p.task.tool);
  if (polled.outcome === "working" || polled.outcome === "unknown") return;
  if (polled.outcome === "input_required") {
    // The remote task asks a person: the run files the question and parks the step (under the poll's fence).
    const event = {
      type: "effect.input",
      node: p.node,
      ...(p.item !== undefined ? { item: p.item } : {}),
      attempt: p.attempt,
      lease_epoch: p.lease_epoch,
      cancellation_epoch: p.cancellation_epoch,
      key: p.task.key,
      server: p.task.server,
      tool: p.task.tool,
      requests: polled.requests,
      ...(polled.state !== undefined ? { state: polled.state } : {}),
      task: { id: p.task.id, wire: p.task.wire },
    };
    await deps.send({ kind: RUN_KIND, id: p.run }, event, `input/${p.task.key}/${p.attempt}/${p.lease_epoch}`);
    return;
  }
  const ref = { run: p.run, node: p.node, ...(p.item !== undefined ? { item: p.item } : {}), attempt: p.attempt };
  const { answer, receipt } = await settleCall(
    { bounded: (r, v) => deps.bounded(r, v), now: () => deps.now() },
    ref,
    { server: p.task.server, tool: p.task.tool, key: p.task.key },
    polled,
    refsWritten(p.task.writes),
  );
  if (answer.outcome === "stopped") return;
  const event: Record<string, unknown> = {
    type: "step.result",
    node: p.node,
    ...(p.item !== undefined ? { item: p.item } : {}),
    attempt: p.attempt,
    lease_epoch: p.lease_epoch,
    cancellation_epoch: p.cancellation_epoch,
    ...toolResult(answer, receipt),
  };
  await deps.send({ kind: RUN_KIND, id: p.run }, event, `task/${p.task.id}/${p.attempt}/${p.lease_epoch}`);
}
