import { expect, it } from "vitest";
import { initialTransition, transition, type AnyMachineSnapshot } from "xstate";
import { compileDefinition, executionMachine } from "../../machines/index.js";
import { WAIT_GRACE_MS } from "../../machines/execution/index.js";
import { rootSeed } from "./run-driver.js";

it("C014 C015 a waiting run past its deadline plus the grace window is ended wait_abandoned; inside it, it is left alone", () => {
  const c = compileDefinition({ name: "w", nodes: [{ id: "nap", kind: "sleep", duration_ms: 1_000 }] }, { handlers: new Set() });
  if (!c.ok) throw new Error("compile");
  const plan = c.plan;
  const seed = rootSeed({ lane: "interactive" });
  let [snap] = initialTransition(executionMachine) as [AnyMachineSnapshot, unknown];
  [snap] = transition(executionMachine, snap, { type: "run.create", run: seed, now: 0, plan } as never);
  expect(snap.context.run.lifecycle.status).toBe("waiting");
  const deadline = snap.context.run.lifecycle.waiting_expires_at as number;
  expect(deadline).toBe(1_000 + WAIT_GRACE_MS);
  // Inside the grace window nothing happens (the sleep's own wake-up was lost, say).
  const early = { type: "timer.fired", kind: "wait", node: "nap", now: deadline - 1, plan };
  const [inside] = transition(executionMachine, snap, early as never);
  expect(inside.context.run?.lifecycle.status).toBe("waiting");
  // Past it, the run is abandoned with its reason on record.
  const [after] = transition(executionMachine, snap, { ...early, now: deadline } as never);
  expect(after.context.run?.lifecycle.status).toBe("failed");
  expect(after.context.run?.error?.code).toBe("wait_abandoned");
  expect(after.value).toBe("failed");
});
