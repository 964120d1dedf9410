import { expect, it } from "vitest";
import { StepExecutor } from "../../actors/engine/executor.js";
import type { PartitionHold } from "../../actors/engine/partition-hold.js";
import type { ExecuteRequest } from "../../machines/index.js";
import { silentLogger } from "../../runtime/log.js";
import type { ActorHost, MailboxClient, StepPool } from "../../runtime/index.js";

const request: ExecuteRequest = {
  run: "t_1",
  root: "t_1",
  tenant: "t",
  node: "a",
  attempt: 1,
  lease_epoch: 1,
  handler: "h",
  input: null,
  timeout_ms: 10_000,
  cancellation_epoch: 0,
  ticket: "t_1/a/1",
  lease_after_ms: 5_000,
};

/** A node that no longer serves the run (its report goes to the mailbox), and a mailbox that refuses `refusals` sends first. */
function world(refusals: number) {
  const sent: { type: string }[] = [];
  let left = refusals;
  const done = new Promise<void>((resolve) => {
    const executor = new StepExecutor({
      nc: undefined as never,
      pool: { run: async () => ({ outcome: "succeeded", output: 7 }) } as unknown as StepPool,
      host: { dispatch: async () => ({ outcome: "not_served" }), events: { publish: () => undefined } } as unknown as ActorHost,
      mailbox: {
        send: async (_address: unknown, event: { type: string }) => {
          if (left-- > 0) return { outcome: "unavailable", detail: "10002 resource limits exceeded for account" };
          sent.push(event);
          return { outcome: "stored" };
        },
      } as unknown as MailboxClient,
      logger: silentLogger,
      onDone: () => resolve(),
    });
    executor.execute(request);
  });
  return { sent, done };
}

it("41 a result the store refuses (a full disk, an election) is sent again until it is stored: its step does not wait for its lease's end", async () => {
  const { sent, done } = world(3);
  await done;
  expect(sent).toEqual([expect.objectContaining({ type: "step.result", outcome: "succeeded", output: 7, attempt: 1 })]);
});

it("41 an attempt whose journal write the store refused (its intent kept, not decided) reports attempt_interrupted: its run retries it at once instead of waiting for its lease", async () => {
  const sent: Record<string, unknown>[] = [];
  await new Promise<void>((resolve) => {
    const executor = new StepExecutor({
      nc: undefined as never,
      pool: {} as StepPool,
      // The intent's write is kept for a store fault; the result goes to the mailbox (the node does not serve the run).
      host: {
        dispatch: async (_address: unknown, event: { type: string }) =>
          event.type === "effect.intent" ? { outcome: "kept", reason: "unavailable" } : { outcome: "not_served" },
        events: { publish: () => undefined },
      } as unknown as ActorHost,
      mailbox: { send: async (_a: unknown, event: Record<string, unknown>) => (sent.push(event), { outcome: "stored" }) } as unknown as MailboxClient,
      tools: {
        lookup: async () => ({ outcome: "found", class: "non_idempotent", input_schema: {} }),
        call: async () => {
          throw new Error("no call may be sent without its intent");
        },
      } as never,
      logger: silentLogger,
      onDone: () => resolve(),
    });
    executor.execute({ ...request, tool: { server: "fx", tool: "charge" }, input: { amount: 1 } });
  });
  expect(sent).toEqual([
    expect.objectContaining({ type: "step.result", outcome: "failed", error: expect.objectContaining({ code: "attempt_interrupted", retryable: true }) }),
  ]);
});

it("41 an attempt stopped while it waits to know its node still holds the run's partition (its run cancelled meanwhile) never starts its handler, and reports nothing (soak: a cancelled map's items ran after the cancel)", async () => {
  let confirm!: (held: boolean) => void;
  const ran: unknown[] = [];
  const sent: unknown[] = [];
  await new Promise<void>((resolve) => {
    const executor = new StepExecutor({
      nc: undefined as never,
      pool: { run: async () => (ran.push(1), { outcome: "succeeded", output: 1 }) } as unknown as StepPool,
      host: {
        dispatch: async (_a: unknown, e: unknown) => (sent.push(e), { outcome: "applied" }),
        events: { publish: () => undefined },
      } as unknown as ActorHost,
      mailbox: {} as MailboxClient,
      // A stale lease: whether the node still holds the partition is known at its next renewal.
      hold: {
        take: () => ({ partition: 0, epoch: 1, lapses: 0 }),
        held: () => new Promise<boolean>((r) => (confirm = r)),
        until: () => Date.now() + 60_000,
        startBy: () => Date.now() + 60_000,
      } as unknown as PartitionHold,
      logger: silentLogger,
      onDone: () => resolve(),
    });
    executor.execute(request);
    executor.abort({ run: request.run, reason: "cancelled", attempts: [{ node: "a", attempt: 1, lease_epoch: 1 }] });
    confirm(true);
  });
  expect(ran).toEqual([]);
  expect(sent).toEqual([]);
});
