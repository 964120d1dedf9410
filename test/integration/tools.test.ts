import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { effectKey } from "../../actors/index.js";
import { waitFor } from "../harness/index.js";
import { everythingServer, startEffectsServer, startEverythingHttp, startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "tools-node" });
let http: EffectsServerHandle;
let stdio: EffectsServerHandle;

beforeAll(async () => {
  http = await startEffectsServer({ http: true });
  stdio = await startEffectsServer({});
  const c = world.client;
  expect((await c.putToolServer({ name: "fx-http", transport: { type: "http", url: http.url } })).outcome).toBe("saved");
  const cmd = stdio.command!;
  expect(
    (
      await c.putToolServer({
        name: "fx-stdio",
        transport: { type: "stdio", command: cmd.command, args: cmd.args, env: cmd.env, secret_env: { FIXTURE_TOKEN: "s3cret" } },
        call_timeout_ms: 20_000,
      })
    ).outcome,
  ).toBe("saved");
}, 60_000);
afterAll(async () => {
  await http?.stop();
});

async function runTool(name: string, server: string, tool: string, args: unknown, extra: Record<string, unknown> = {}): Promise<RunAnswer> {
  const def = { name, nodes: [{ id: "call", kind: "tool", server, tool, arguments: args, ...extra }] };
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const started = await world.client.startRun({ definition: name });
  expect(started.outcome).toBe("started");
  return world.settled((started.run as RunAnswer).id);
}

describe("tool server registry", () => {
  it("keeps credentials with the gateway: get and list show secret names only", async () => {
    const got = await world.client.getToolServer("fx-stdio");
    expect(got.outcome).toBe("found");
    expect(JSON.stringify(got)).not.toContain("s3cret");
    expect((got.server as { transport: { secret_env: string[] } }).transport.secret_env).toEqual(["FIXTURE_TOKEN"]);
    const listed = await world.client.listToolServers();
    expect((listed.servers as { name: string }[]).map((s) => s.name)).toEqual(["fx-http", "fx-stdio"]);
    expect(JSON.stringify(listed)).not.toContain("s3cret");
  });

  it("bad input gets closed answers", async () => {
    expect((await world.client.putToolServer({ name: "bad name!", transport: { type: "http", url: "http://x" } })).outcome).toBe("invalid_input");
    expect((await world.client.putToolServer({ name: "ok", transport: { type: "ftp", url: "ftp://x" } })).outcome).toBe("invalid_input");
    expect((await world.client.putToolServer({ name: "ok", transport: { type: "http", url: "file:///etc/passwd" } })).outcome).toBe("invalid_input");
    expect((await world.client.getToolServer("nope")).outcome).toBe("server_not_found");
    expect((await world.client.deleteToolServer("nope")).outcome).toBe("server_not_found");
    expect((await world.client.reconcile("t1_nope", "k", "done")).outcome).toBe("run_not_found");
  });
});

describe("tool classes", () => {
  it("untrusted annotations claiming read-only do not make a tool read-only; trusted ones do; an operator override wins", async () => {
    const untrusted = await world.client.listTools("fx-http");
    const classOf = (answer: typeof untrusted, tool: string) =>
      (answer.tools as { name: string; class: string; class_source: string }[]).find((t) => t.name === tool);
    expect(classOf(untrusted, "lying_reader")).toMatchObject({ class: "non_idempotent", class_source: "default" });
    expect(classOf(untrusted, "get_value")).toMatchObject({ class: "non_idempotent" });
    expect(
      (await world.client.putToolServer({ name: "fx-trusted", transport: { type: "http", url: http.url }, trusted: true, overrides: { charge: "idempotent" } }))
        .outcome,
    ).toBe("saved");
    const trusted = await world.client.listTools("fx-trusted");
    expect(classOf(trusted, "lying_reader")).toMatchObject({ class: "read_only", class_source: "annotations" });
    expect(classOf(trusted, "set_value")).toMatchObject({ class: "idempotent", class_source: "annotations" });
    expect(classOf(trusted, "charge")).toMatchObject({ class: "idempotent", class_source: "override" });
    expect(classOf(trusted, "fail")).toMatchObject({ class: "non_idempotent", class_source: "default" });
  });
});

describe.each([
  ["stdio", "fx-stdio", () => stdio],
  ["Streamable HTTP", "fx-http", () => http],
])("tool nodes over %s", (_label, server, fixture) => {
  it("a tool node records its intent, calls once with the effect key in _meta, and stores the receipt", async () => {
    const before = fixture().counts().effects.charge ?? 0;
    const run = await runTool(`charge-${server}`, server, "charge", { account: "acme", amount: 7 });
    expect(run.status).toBe("succeeded");
    expect(run.result).toMatchObject({ call: { account: "acme", amount: 7 } });
    const counts = fixture().counts();
    expect(counts.effects.charge).toBe(before + 1);
    expect(counts.keys).toContain(effectKey(run.id, "call", undefined, { server, tool: "charge", arguments: { account: "acme", amount: 7 } }));
    const events = (await world.client.runEvents(run.id)).events as { type: string; key?: string }[];
    const types = events.map((e) => e.type);
    expect(types.indexOf("effect_intent")).toBeGreaterThan(-1);
    expect(types.indexOf("effect_observed")).toBeGreaterThan(types.indexOf("effect_intent"));
  });

  it("a tool that reports an error fails the step tool_error", async () => {
    const run = await runTool(`fail-${server}`, server, "fail", {});
    expect(run.status).toBe("failed");
    expect(run.nodes.call!.error?.code).toBe("tool_error");
  });
});

describe("a tool server that misbehaves fails the call with a typed code in bounded time, and no worker is stuck", () => {
  // One attempt each: a call whose outcome is unknown is never retried blindly (a retry would hold the step for a person; see the chaos tests).
  const once = { retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } };

  it("hangs: tool_timeout at the node's timeout", async () => {
    const run = await runTool("hang", "fx-http", "hang", {}, { timeout_ms: 1_500, ...once });
    expect(run.status).toBe("failed");
    expect(run.nodes.call!.error?.code).toBe("tool_timeout");
  });

  it("crashes mid-call: tool_server_crashed (stdio), and the next call restarts the server", async () => {
    const run = await runTool("crash", "fx-stdio", "crash", {}, once);
    expect(run.status).toBe("failed");
    expect(run.nodes.call!.error?.code).toBe("tool_server_crashed");
    const after = await runTool("after-crash", "fx-stdio", "get_value", { key: "k" });
    expect(after.status).toBe("succeeded");
  });

  it("answers 5 MB: tool_output_too_large; the receipt is stored, so a retry does not call again", async () => {
    const before = http.counts().calls.big ?? 0;
    const run = await runTool("big", "fx-http", "big", {}, { retry: { max_attempts: 2, backoff_ms: 10, max_backoff_ms: 10 } });
    expect(run.status).toBe("failed");
    expect(run.nodes.call!.error?.code).toBe("tool_output_too_large");
    expect(http.counts().calls.big).toBe(before + 1);
  });

  it("an unknown server or tool fails at once, not retried", async () => {
    expect((await runTool("no-server", "nope", "x", {})).nodes.call!.error?.code).toBe("tool_server_not_found");
    expect((await runTool("no-tool", "fx-http", "nope", {})).nodes.call!.error?.code).toBe("tool_tool_not_found");
  });

  it("after all that, the node still runs tool steps at once", async () => {
    const runs = await Promise.all([1, 2, 3, 4].map((i) => runTool(`again-${i}`, "fx-http", "get_value", { key: `k${i}` })));
    expect(runs.map((r) => r.status)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"]);
  });
});

describe("zombies", () => {
  it("G2 G5 an attempt with a stale lease or a stale cancellation epoch can record neither an intent nor a receipt, nor move the cancelled run", async () => {
    const def = { name: "zombie-target", nodes: [{ id: "work", kind: "code", handler: "slow", input: { ms: 20_000 } }] };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const run = ((await world.client.startRun({ definition: "zombie-target" })).run as RunAnswer).id;
    await waitFor(async () => ((await world.client.getRun(run)).run as RunAnswer).status === "running" || undefined, {
      timeoutMs: 10_000,
      describe: "the run to start",
    });
    const host = world.node.node.host;
    const ask = (event: Record<string, unknown>, id: string) => host.dispatch({ kind: "run", id: run }, event, id);
    const intent = { type: "effect.intent", node: "work", key: `${run}:work:x`, server: "fx-http", tool: "charge", class: "non_idempotent", arguments: {} };
    expect(await ask({ ...intent, attempt: 1, lease_epoch: 7, cancellation_epoch: 0 }, "z1")).toMatchObject({ value: { outcome: "stale_lease" } });
    expect(await ask({ ...intent, attempt: 3, lease_epoch: 1, cancellation_epoch: 0 }, "z2")).toMatchObject({ value: { outcome: "stale_lease" } });
    const receipt = { type: "effect.receipt", node: "work", receipt: { key: `${run}:work:x`, state: "observed", value: 1, at: 1 } };
    expect(await ask({ ...receipt, attempt: 1, lease_epoch: 7, cancellation_epoch: 0 }, "z3")).toMatchObject({ value: { outcome: "stale_lease" } });
    expect((await world.client.cancelRun(run)).outcome).toBe("cancelled");
    expect(await ask({ ...intent, attempt: 1, lease_epoch: 1, cancellation_epoch: 0 }, "z4")).toMatchObject({ value: { outcome: "stale_cancel_epoch" } });
    expect(await ask({ ...receipt, attempt: 1, lease_epoch: 1, cancellation_epoch: 0 }, "z5")).toMatchObject({ value: { outcome: "stale_cancel_epoch" } });
    const result = { type: "step.result", node: "work", attempt: 1, lease_epoch: 1, cancellation_epoch: 0, outcome: "succeeded", output: 1 };
    expect(await ask(result, "z6")).toMatchObject({ value: { outcome: "stale_cancel_epoch" } });
    expect(((await world.client.getRun(run)).run as RunAnswer).status).toBe("cancelled");
    const events = (await world.client.runEvents(run)).events as { type: string }[];
    expect(events.map((e) => e.type)).not.toContain("effect_intent");
  });
});

describe("ctx.tools.call from a handler: the same gateway and journal", () => {
  it("C093 a retried attempt whose call has a completed journal entry gets the stored result; the tool is not called again", async () => {
    const before = http.counts().calls.charge ?? 0;
    const def = {
      name: "handler-tool",
      nodes: [
        {
          id: "work",
          kind: "code",
          handler: "tool_then_fail",
          input: { server: "fx-http", tool: "charge", args: { account: "retry", amount: 3 }, until: 3 },
          retry: { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 10 },
        },
      ],
    };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const run = await world.settled(((await world.client.startRun({ definition: "handler-tool" })).run as RunAnswer).id);
    expect(run.status).toBe("succeeded");
    expect(run.result).toMatchObject({ work: { attempt: 3, answer: { account: "retry", amount: 3, charge_no: before + 1 } } });
    expect(http.counts().calls.charge).toBe(before + 1);
  });

  it("several calls in one handler: each journaled, a tool's error is a ToolError with its code", async () => {
    const def = { name: "handler-two", nodes: [{ id: "work", kind: "code", handler: "two_tools", input: { server: "fx-http" } }] };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const run = await world.settled(((await world.client.startRun({ definition: "handler-two" })).run as RunAnswer).id);
    expect(run.status).toBe("succeeded");
    expect(run.result).toMatchObject({ work: { second: { key: "k2", value: "v2" }, failed: "tool_error" } });
    const events = ((await world.client.runEvents(run.id)).events as { type: string }[]).map((e) => e.type);
    expect(events.filter((t) => t === "effect_intent")).toHaveLength(3);
    expect(events.filter((t) => t === "effect_observed")).toHaveLength(3);
  });
});

describe("@modelcontextprotocol/server-everything through the gateway", () => {
  it("its echo tool answers a tool node over stdio and Streamable HTTP", async () => {
    const cmd = everythingServer();
    const everyHttp = await startEverythingHttp();
    try {
      expect((await world.client.putToolServer({ name: "every-stdio", transport: { type: "stdio", command: cmd.command, args: cmd.args } })).outcome).toBe(
        "saved",
      );
      expect((await world.client.putToolServer({ name: "every-http", transport: { type: "http", url: everyHttp.url } })).outcome).toBe("saved");
      for (const server of ["every-stdio", "every-http"]) {
        const run = await runTool(`echo-${server}`, server, "echo", { message: "hello" });
        expect(run.status, server).toBe("succeeded");
        expect(JSON.stringify(run.result)).toContain("hello");
      }
    } finally {
      await everyHttp.stop();
    }
  });
});

describe("replay and trajectory", () => {
  it("the trajectory lists steps, tool calls (arguments, class, result, duration) and the outcome; a replay makes zero calls and yields an identical trajectory", async () => {
    const def = {
      name: "replayable",
      nodes: [
        { id: "charge", kind: "tool", server: "fx-http", tool: "charge", arguments: { account: "replay", amount: "${input.amount}" } },
        {
          id: "lookup",
          kind: "code",
          needs: ["charge"],
          handler: "tool_then_fail",
          input: { server: "fx-http", tool: "get_value", args: { key: "colour" }, until: 1 },
        },
        { id: "fan", kind: "map", needs: ["lookup"], items: "${input.items}", handler: "echo", input: "${item}", max_fanout: 10 },
      ],
    };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const original = await world.settled(
      ((await world.client.startRun({ definition: "replayable", input: { amount: 5, items: [1, 2, 3] } })).run as RunAnswer).id,
    );
    expect(original.status).toBe("succeeded");
    const trajectory = await world.client.trajectory(original.id);
    expect(trajectory.outcome).toBe("trajectory");
    const lines = trajectory.lines as {
      kind: string;
      node?: string;
      tool?: string;
      class?: string;
      arguments?: unknown;
      state?: string;
      duration_ms?: number;
    }[];
    const calls = lines.filter((l) => l.kind === "tool_call");
    expect(calls.map((c) => [c.node, c.tool, c.class, c.state])).toEqual([
      ["charge", "charge", "non_idempotent", "observed"],
      ["lookup", "get_value", "non_idempotent", "observed"],
    ]);
    expect(calls[0]!.arguments).toEqual({ account: "replay", amount: 5 });
    expect(calls[0]!.duration_ms).toBeGreaterThanOrEqual(0);
    expect(lines.filter((l) => l.kind === "item")).toHaveLength(3);
    expect(lines.at(-1)).toMatchObject({ kind: "run", status: "succeeded" });

    const before = JSON.stringify(http.counts().calls);
    const replayed = await world.client.replay(original.id);
    expect(replayed).toMatchObject({ outcome: "replayed", original: original.id, status: "succeeded", identical: true });
    expect(JSON.stringify(http.counts().calls)).toBe(before);
    const again = await world.client.trajectory(String(replayed.replay));
    expect((again.lines as { kind: string }[]).filter((l) => l.kind === "tool_call")).toHaveLength(2);
  });

  it("a replay whose logic meets another world is reported at the first step that differs", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "runway-replay-")), "value.txt");
    writeFileSync(file, "before");
    const def = {
      name: "world-dependent",
      nodes: [
        { id: "read", kind: "code", handler: "file_value", input: { file } },
        { id: "after", kind: "code", needs: ["read"], handler: "echo", input: "${steps.read.output}" },
      ],
    };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const original = await world.settled(((await world.client.startRun({ definition: "world-dependent" })).run as RunAnswer).id);
    expect(original.status).toBe("succeeded");
    writeFileSync(file, "after");
    const replayed = await world.client.replay(original.id);
    expect(replayed).toMatchObject({ outcome: "replayed", identical: false, divergence: { original: { node: "read" }, replay: { node: "read" } } });
    expect(replayed.divergence).toMatchObject({ original: { output: "before" }, replay: { output: "after" } });
  });

  it("bad input: an unknown run, a run still running", async () => {
    expect((await world.client.replay("t1_nope")).outcome).toBe("run_not_found");
    expect((await world.client.trajectory("t2_nope")).outcome).toBe("run_not_found");
    const def = { name: "still-running", nodes: [{ id: "w", kind: "code", handler: "slow", input: { ms: 5_000 } }] };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const id = ((await world.client.startRun({ definition: "still-running" })).run as RunAnswer).id;
    expect((await world.client.replay(id)).outcome).toBe("run_not_ended");
    await world.client.cancelRun(id);
  });
});

describe("long tools over MCP Tasks", () => {
  let modern: EffectsServerHandle;
  beforeAll(async () => {
    modern = await startModernServer();
    expect((await world.client.putToolServer({ name: "fx-modern", protocol: "2026-07-28", transport: { type: "http", url: modern.url } })).outcome).toBe(
      "saved",
    );
  }, 30_000);
  afterAll(async () => {
    await modern?.stop();
  });

  const wires = [
    ["2025-11-25 (core tasks)", "fx-http", () => http],
    ["2026-07-28 (tasks extension)", "fx-modern", () => modern],
  ] as const;

  it.each(wires)("%s: the task id is journaled, no worker is held while it works, and its result is the step's", async (_label, server, fixture) => {
    const calls = fixture().counts().calls.slow_task ?? 0;
    // Long enough that the checks below, on a loaded machine, see the task still working.
    const def = { name: `task-${server}`, nodes: [{ id: "call", kind: "tool", server, tool: "slow_task", arguments: { ms: 3_000 } }] };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const id = ((await world.client.startRun({ definition: def.name })).run as RunAnswer).id;
    await waitFor(async () => ((await world.client.runEvents(id)).events as { type: string }[]).some((e) => e.type === "tool_task_started") || undefined, {
      timeoutMs: 15_000,
      describe: "the task to start",
    });
    // The attempt's slot frees once the run has stored the task id (a hand-back a moment after
    // the event): waited for, and seen while the task still works on the server.
    await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 1_000, describe: "the attempt's worker to be given back" });
    expect(((await world.client.getRun(id)).run as { status: string }).status).toBe("running");
    const run = await world.settled(id);
    expect(run.status).toBe("succeeded");
    expect(run.result).toMatchObject({ call: { done: true, ms: 3_000 } });
    expect(fixture().counts().calls.slow_task).toBe(calls + 1);
  });

  it.each(wires)("%s: cancelling the run sends tasks/cancel", async (_label, server, fixture) => {
    const def = { name: `task-cancel-${server}`, nodes: [{ id: "call", kind: "tool", server, tool: "slow_task", arguments: { ms: 60_000 } }] };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const id = ((await world.client.startRun({ definition: def.name })).run as RunAnswer).id;
    const started = await waitFor(
      async () => ((await world.client.runEvents(id)).events as { type: string; task?: string }[]).find((e) => e.type === "tool_task_started"),
      { timeoutMs: 15_000, describe: "the task to start" },
    );
    // The task's intent is let finish: the cancel is enforced once the server says the task ended (cancelled).
    expect((await world.client.cancelRun(id)).outcome).toBe("cancel_requested");
    await waitFor(() => fixture().counts().cancelled.includes(started.task!) || undefined, { timeoutMs: 15_000, describe: "tasks/cancel to reach the server" });
    expect((await world.settled(id)).status).toBe("cancelled");
  });
});

describe("requests a server makes of the gateway", () => {
  it("elicitation/create and sampling/createMessage are refused with a clear MCP error until approvals and the model gateway route them", async () => {
    const asked = await runTool("ask-user", "fx-stdio", "ask_user", {}, { retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } });
    expect(asked.status).toBe("failed");
    expect(asked.nodes.call!.error).toMatchObject({ code: "tool_error" });
    expect(JSON.stringify(asked.nodes.call!.error)).toContain("does not route elicitation");
    const sampled = await runTool("sample", "fx-stdio", "sample", {}, { retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } });
    expect(JSON.stringify(sampled.nodes.call!.error)).toContain("does not route sampling");
  });

  it("C057 a tool node runs as one step of its run: no child run is created", async () => {
    const run = await runTool("width-one", "fx-http", "get_value", { key: "w" });
    expect(run.status).toBe("succeeded");
    const listed = (await world.client.listRuns({ limit: 500 })).runs as { id: string; parent_run_id: string | null }[];
    expect(listed.filter((r) => r.parent_run_id === run.id)).toEqual([]);
    const events = ((await world.client.runEvents(run.id)).events as { type: string }[]).map((e) => e.type);
    expect(events.filter((t) => t === "step_succeeded")).toHaveLength(1);
    expect(events).not.toContain("child_started");
  });
});

describe("cancel with calls in flight", () => {
  it("a non-idempotent call in flight is let finish: the cancel is requested, the receipt is recorded, then the run is cancelled; the tool ran once", async () => {
    const before = http.counts().effects.charge ?? 0;
    const def = {
      name: "cancel-charge",
      nodes: [{ id: "call", kind: "tool", server: "fx-http", tool: "charge", arguments: { account: "c", amount: 9, delay_ms: 1_500 } }],
    };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const id = ((await world.client.startRun({ definition: def.name })).run as RunAnswer).id;
    await waitFor(() => (http.counts().effects.charge ?? 0) > before || undefined, { timeoutMs: 15_000, describe: "the charge to be applied" });
    const cancel = await world.client.cancelRun(id, "changed my mind");
    expect(cancel.outcome).toBe("cancel_requested");
    expect((cancel.run as { status: string; cancel: { enforced_at: number | null } }).cancel.enforced_at).toBeNull();
    const run = await world.settled(id);
    expect(run.status).toBe("cancelled");
    expect((run as unknown as { cancel: { enforced_at: number } }).cancel.enforced_at).toBeGreaterThan(0);
    const calls = ((await world.client.trajectory(id)).lines as { kind: string; state?: string }[]).filter((l) => l.kind === "tool_call");
    expect(calls).toEqual([expect.objectContaining({ state: "observed" })]);
    expect(http.counts().effects.charge).toBe(before + 1);
    const events = ((await world.client.runEvents(id)).events as { type: string }[]).map((e) => e.type);
    expect(events.indexOf("run_cancel_requested")).toBeLessThan(events.indexOf("effect_observed"));
    expect(events.indexOf("effect_observed")).toBeLessThan(events.indexOf("run_cancelled"));
  });

  it("C081 an idempotent call in flight is aborted and the run cancelled at once; the handler's next call is refused (the server never sees it); the run ends cancelled, not failed", async () => {
    await world.client.putToolServer({ name: "fx-trusted", transport: { type: "http", url: http.url }, trusted: true, overrides: { charge: "idempotent" } });
    const before = http.counts().calls.charge ?? 0;
    const def = {
      name: "cancel-handler",
      nodes: [
        {
          id: "work",
          kind: "code",
          handler: "calls_in_order",
          input: {
            server: "fx-trusted",
            calls: [
              { tool: "set_value", args: { key: "cancel-h", value: "1", delay_ms: 10_000 } },
              { tool: "charge", args: { account: "never", amount: 1 } },
            ],
          },
        },
      ],
    };
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const id = ((await world.client.startRun({ definition: def.name })).run as RunAnswer).id;
    await waitFor(() => http.counts().values["cancel-h"] === "1" || undefined, { timeoutMs: 15_000, describe: "the first call to be made" });
    expect((await world.client.cancelRun(id)).outcome).toBe("cancelled");
    await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 15_000, describe: "the handler to stop" });
    expect(http.counts().calls.charge ?? 0).toBe(before);
    const calls = ((await world.client.trajectory(id)).lines as { kind: string; state?: string; error?: { code: string } }[]).filter(
      (l) => l.kind === "tool_call",
    );
    expect(calls).toEqual([expect.objectContaining({ state: "failed", error: expect.objectContaining({ code: "abandoned_by_cancel" }) })]);
    const run = await world.settled(id);
    expect([run.status, run.error]).toEqual(["cancelled", null]);
  });
});
