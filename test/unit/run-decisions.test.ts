/**
 * The run machine's named actions, each a decision of the DAG walk (machines/execution/reduce.ts),
 * tested on their own: given the run as it is and one event, the run's next data, the effects, and
 * the lifecycle ops the walk took — handed to the machine, which takes each as a transition. The
 * data's lifecycle columns are the machine's to write: a decision leaves them as they were.
 */
import { describe, expect, it } from "vitest";
import { initialTransition, transition } from "xstate";
import { decisions } from "../../machines/execution/reduce.js";
import { executionMachine, RunCommandSchema, type ExecutionContext, type RunContext } from "../../machines/index.js";
import { queuedLifecycle } from "../../machines/run/index.js";
import { deepFreeze, emitted, executes, plan, rootSeed } from "./run-driver.js";

const p = plan({ name: "w", nodes: [{ id: "a", kind: "code", handler: "h" }] });
const create = (now = 10) => ({ type: "run.create" as const, run: rootSeed({ id: "t_1", root_run_id: "t_1", lane: "interactive" as const }), now, plan: p });

describe("a decision of the DAG walk", () => {
  it("create: the run's data with its first step offered, and the one op it took (claim) left to the machine", () => {
    const d = decisions.create({ run: null }, create());
    expect(d.moves).toEqual([{ op: "claim", now: 10 }]);
    // The seed's lifecycle is `queued` (the machine's create transition enters it); claiming is the machine's.
    expect(d.context.run!.lifecycle).toEqual(queuedLifecycle());
    expect(d.effects.some((e) => e.type === "runway.local" && e.channel === "step.ready")).toBe(true);
    const answer = d.effects.find((e) => e.type === "runway.answer") as { value: { outcome: string; run: { status: string; started_at: number } } };
    // The answer shows the run as the decision left it: running since now.
    expect(answer.value.outcome).toBe("started");
    expect(answer.value.run).toMatchObject({ status: "running", started_at: 10 });
  });

  it("a step's result that ends the walk takes the succeed op; the run's result is its data", () => {
    const created = decisions.create({ run: null }, create());
    // As the machine leaves it after the create's claim.
    const run: RunContext = deepFreeze({ ...created.context.run!, lifecycle: { ...queuedLifecycle(), status: "running", started_at: 10 } });
    const request = executes(created.effects as never)[0]!;
    const d = decisions.result({ run }, {
      type: "step.result",
      node: "a",
      attempt: request.attempt,
      lease_epoch: request.lease_epoch,
      outcome: "succeeded",
      output: 42,
      now: 20,
      plan: p,
    } as never);
    expect(d.moves).toEqual([{ op: "succeed", now: 20 }]);
    expect(d.context.run!.lifecycle).toBe(run.lifecycle);
    expect(d.context.run!.result).toEqual({ a: 42 });
    expect(d.context.run!.nodes.a!.s).toBe("succeeded");
  });

  it("a cancel takes the cancel op and nothing is written into the lifecycle by the walk", () => {
    const created = decisions.create({ run: null }, create());
    const run: RunContext = deepFreeze({ ...created.context.run!, lifecycle: { ...queuedLifecycle(), status: "running", started_at: 10 } });
    const d = decisions.cancel({ run }, { type: "run.cancel", reason: "done", now: 30, plan: p } as never);
    expect(d.moves.map((m) => m.op)).toEqual(["cancel"]);
    expect(d.context.run!.lifecycle).toBe(run.lifecycle);
  });

  it("a heartbeat moves nothing: no op, the lifecycle as it was", () => {
    const created = decisions.create({ run: null }, create());
    const run: RunContext = deepFreeze({ ...created.context.run!, lifecycle: { ...queuedLifecycle(), status: "running", started_at: 10 } });
    const request = executes(created.effects as never)[0]!;
    const d = decisions.heartbeat({ run }, {
      type: "step.heartbeat",
      node: "a",
      attempt: request.attempt,
      lease_epoch: request.lease_epoch,
      now: 15,
      plan: p,
    } as never);
    expect(d.moves).toEqual([]);
    expect(d.context.run!.lifecycle).toBe(run.lifecycle);
  });
});

describe("the machine takes a decision's ops as transitions", () => {
  it("create then claim: the machine's state and the stored lifecycle columns are what the run table writes", () => {
    const [snap] = initialTransition(executionMachine);
    const [next, actions] = transition(executionMachine, snap, create() as never);
    expect(next.value).toEqual({ live: "running" });
    const run = (next.context as ExecutionContext).run!;
    expect(run.lifecycle).toEqual({ ...queuedLifecycle(), status: "running", started_at: 10 });
    // The ops are internal: they emit nothing of their own.
    expect(emitted(actions).filter((e) => e.type === "runway.answer")).toHaveLength(1);
  });

  it("a lifecycle op is not a command: the run's command schema refuses one, and each live state takes only the ops the table allows there", () => {
    expect(RunCommandSchema.safeParse({ type: "lifecycle.succeed", move: { op: "succeed", now: 1 } }).success).toBe(false);
    const ops = (status: string) =>
      Object.keys(
        ((executionMachine.root.states.live!.states[status] ?? executionMachine.root.states[status]) as unknown as { on: Record<string, unknown> }).on,
      ).filter((t) => t.startsWith("lifecycle."));
    expect(ops("queued")).toEqual(["lifecycle.claim", "lifecycle.mark_waiting", "lifecycle.fail", "lifecycle.cancel"]);
    expect(ops("running")).toEqual(["lifecycle.claim", "lifecycle.mark_waiting", "lifecycle.succeed", "lifecycle.fail", "lifecycle.cancel"]);
    expect(ops("waiting")).toEqual([
      "lifecycle.admit",
      "lifecycle.claim",
      "lifecycle.mark_waiting",
      "lifecycle.resume",
      "lifecycle.succeed",
      "lifecycle.fail",
      "lifecycle.cancel",
    ]);
    for (const ended of ["succeeded", "failed", "cancelled"]) expect(ops(ended)).toEqual([]);
  });
});
