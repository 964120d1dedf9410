import { describe, expect, it } from "vitest";
import { MAX_ERROR_MESSAGE } from "../../actors/index.js";
import { natsCli, waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld();

async function run(definition: object, input: unknown = {}): Promise<RunAnswer> {
  const name = (definition as { name: string }).name;
  const put = await world.client.putDefinition(definition);
  expect(["published", "unchanged"], JSON.stringify(put)).toContain(put.outcome);
  const started = await world.client.startRun({ definition: name, input });
  expect(started.outcome, JSON.stringify(started)).toBe("started");
  return settled(world.client, (started.run as RunAnswer).id);
}

describe("executing workflows", () => {
  it("a failing parallel branch settles its siblings and never raises out of the container", async () => {
    const done = await run({
      name: "par-fail",
      nodes: [
        {
          id: "par",
          kind: "parallel",
          branches: [
            [{ id: "bad", kind: "code", handler: "fail_terminal" }],
            [
              { id: "ok1", kind: "code", handler: "slow", input: { ms: 150 } },
              { id: "ok2", kind: "code", handler: "echo", input: "after ok1" },
            ],
          ],
        },
        { id: "after", kind: "code", needs: ["par"], handler: "noop" },
      ],
    });
    expect(done.status).toBe("failed");
    expect(done.nodes.bad!.status).toBe("failed");
    // The sibling branch ran to its end although its neighbour had already failed.
    expect(done.nodes.ok1!.status).toBe("succeeded");
    expect(done.nodes.ok2!.status).toBe("succeeded");
    expect(done.nodes.par!.status).toBe("failed");
    expect(done.nodes.after!.status).toBe("skipped");
  });

  it("continue_on_error lets a run go past a failed node", async () => {
    const done = await run({
      name: "coe",
      nodes: [
        { id: "bad", kind: "code", handler: "fail_terminal", continue_on_error: true },
        { id: "next", kind: "code", needs: [{ node: "bad", when: "always" }], handler: "noop" },
      ],
    });
    expect(done.status).toBe("succeeded");
    expect(done.nodes.next!.status).toBe("succeeded");
  });

  it("an empty map list succeeds without a call", async () => {
    const done = await run(
      { name: "map-empty", nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "fail_terminal", max_fanout: 5 }] },
      { list: [] },
    );
    expect(done.status).toBe("succeeded");
    expect((done.result as { m: unknown[] }).m).toEqual([]);
  });

  it("an over-width list fails before any call", async () => {
    const done = await run(
      { name: "map-wide", nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "count_invocations", max_fanout: 3 }] },
      { list: [1, 2, 3, 4] },
    );
    expect(done.status).toBe("failed");
    expect(done.nodes.m!.error?.code).toBe("fanout_exceeded");
    expect(done.nodes.m!.items).toBeUndefined();
  });

  it("a map keeps input order when items finish out of order", async () => {
    const list = [5, 1, 4, 2, 3].map((n) => ({ ms: n * 40, value: `v${n}` }));
    const done = await run({ name: "map-order", nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "delay_echo", max_fanout: 10 }] }, { list });
    expect(done.status).toBe("succeeded");
    expect((done.result as { m: unknown[] }).m).toEqual(["v5", "v1", "v4", "v2", "v3"]);
  });

  it("a branch runs one path and skips the other", async () => {
    const def = {
      name: "branchy",
      nodes: [
        {
          id: "b",
          kind: "branch",
          condition: { ref: "${input.big}", op: "truthy" },
          then: [{ id: "yes", kind: "code", handler: "echo", input: "big" }],
          else: [{ id: "no", kind: "code", handler: "echo", input: "small" }],
        },
        { id: "end", kind: "code", needs: ["b"], handler: "noop" },
      ],
    };
    const big = await run(def, { big: true });
    expect(big.nodes.yes!.status).toBe("succeeded");
    expect(big.nodes.no!.status).toBe("skipped");
    expect(big.nodes.end!.status).toBe("succeeded");
  });

  it("a retryable failure retries with backoff; a terminal one fails the step at once", async () => {
    const done = await run({
      name: "retries",
      nodes: [
        { id: "flaky", kind: "code", handler: "fail_retryable", retry: { max_attempts: 3, backoff_ms: 20, max_backoff_ms: 50 }, continue_on_error: true },
        { id: "fatal", kind: "code", handler: "fail_terminal", retry: { max_attempts: 3, backoff_ms: 20, max_backoff_ms: 50 }, continue_on_error: true },
      ],
    });
    expect(done.nodes.flaky!.attempt).toBe(3);
    expect(done.nodes.fatal!.attempt).toBe(1);
  });

  it("a sleep parks the run as waiting on a delay, then wakes it", async () => {
    await world.client.putDefinition({
      name: "sleeper",
      nodes: [
        { id: "nap", kind: "sleep", duration_ms: 1_200 },
        { id: "after", kind: "code", needs: ["nap"], handler: "noop" },
      ],
    });
    const started = await world.client.startRun({ definition: "sleeper" });
    const id = (started.run as RunAnswer).id;
    const parked = (await world.client.getRun(id)).run as RunAnswer & { waiting: { on: string; expires_at: number } | null };
    expect(parked.status).toBe("waiting");
    expect(parked.waiting?.on).toBe("delay");
    expect((await settled(world.client, id)).status).toBe("succeeded");
  });

  it("cancel: status first; a step result arriving after it cannot make the run succeed; a terminal run never moves", async () => {
    await world.client.putDefinition({ name: "cancelme", nodes: [{ id: "long", kind: "code", handler: "slow", input: { ms: 400 } }] });
    const started = await world.client.startRun({ definition: "cancelme" });
    const id = (started.run as RunAnswer).id;
    const cancelled = await world.client.cancelRun(id, "changed my mind");
    expect(cancelled.outcome).toBe("cancelled");
    expect((cancelled.run as RunAnswer).status).toBe("cancelled");
    // The handler finishes later and reports: the run stays cancelled.
    await waitFor(() => world.node.executor.inFlight === 0 && world.node.executor.stats.reported >= 1, {
      timeoutMs: 10_000,
      describe: "the slow handler to report",
    });
    const after = (await world.client.getRun(id)).run as RunAnswer;
    expect(after.status).toBe("cancelled");
    expect((await world.client.cancelRun(id)).outcome).toBe("not_cancellable");
  });

  it("a handler's error message is cut to 4 KiB: a 2 MB message fails its step at once instead of a report no run can store", async () => {
    const done = await run({ name: "loud", nodes: [{ id: "l", kind: "code", handler: "fail_loud", input: { chars: 2_000_000 } }] });
    expect(done.status).toBe("failed");
    expect(done.nodes.l!.attempt).toBe(1);
    const message = (done.nodes.l!.error as { code: string; message: string }).message;
    expect(message.length).toBe(MAX_ERROR_MESSAGE + 1);
    expect(message.endsWith("…")).toBe(true);
  });

  it("a result over 32 KiB is stored in the object store and recorded by reference", async () => {
    const done = await run({ name: "bigout", nodes: [{ id: "b", kind: "code", handler: "big", input: { bytes: 40_000 } }] });
    expect(done.status).toBe("succeeded");
    const ref = (done.result as { b: { $ref: string; bytes: number } }).b;
    expect(ref.$ref).toMatch(/^rw-results\//);
    expect(ref.bytes).toBeGreaterThan(40_000);
  });

  it("a subworkflow chain as deep as a run tree may grow runs; one level deeper is refused at publish with depth_exceeded", async () => {
    await world.client.putDefinition({ name: "level-7", nodes: [{ id: "leaf", kind: "code", handler: "noop" }] });
    // level-k nests 8 − k runs deep; a run tree holds depths 0..5, six runs.
    for (let level = 6; level >= 2; level--) {
      const put = await world.client.putDefinition({ name: `level-${level}`, nodes: [{ id: "down", kind: "subworkflow", workflow: `level-${level + 1}` }] });
      expect(put.outcome, JSON.stringify(put)).toBe("published");
    }
    const deeper = await world.client.putDefinition({ name: "level-1", nodes: [{ id: "down", kind: "subworkflow", workflow: "level-2" }] });
    expect(deeper.outcome).toBe("invalid_definition");
    expect(JSON.stringify(deeper.errors)).toContain("depth_exceeded");
    const started = await world.client.startRun({ definition: "level-2" });
    const done = await settled(world.client, (started.run as RunAnswer).id);
    expect(done.status).toBe("succeeded");
  });

  it("the runway service is discoverable with nats micro", async () => {
    const ls = await natsCli(world.server, ["micro", "ls"]);
    expect(ls.stdout).toContain("runway");
    const info = await natsCli(world.server, ["micro", "info", "runway"]);
    expect(info.stdout).toContain("runway.v1.*.runs.start");
    const stats = await natsCli(world.server, ["micro", "stats", "runway"]);
    expect(stats.code, stats.stderr).toBe(0);
  });
});
