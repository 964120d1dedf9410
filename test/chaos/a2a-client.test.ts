import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { startServer, waitFor, type ChildHandle, type NatsServerHandle } from "../harness/index.js";
import { finished, spawnWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/**
 * Issue 39 §2: two deployments (two NATS servers). Deployment B's tenant `b` exposes `nap` (not
 * public: an API key); deployment A's tenant `a` runs a workflow whose `a2a` step calls it, with
 * the key given to A's node as the credential `a/remote` (never in the definition).
 */
const children: ChildHandle[] = [];
let serverA: NatsServerHandle;
let serverB: NatsServerHandle;
let ncA: NatsConnection;
let ncB: NatsConnection;
let apiA: RunwayClient;
let apiB: RunwayClient;
let card = "";
let credentials = "";
/** Deployment A's one node (restarted by the crash test). */
let callerNode: ChildHandle;

function spawnNode(server: NatsServerHandle, name: string, extra: string[]): ChildHandle {
  return spawnWorkflowNode(server.url, children, name, { leaseTtlMs: 2_000, extra });
}

async function caller(): Promise<ChildHandle> {
  const child = spawnNode(serverA, "caller", ["--a2a-credentials", credentials]);
  await child.waitForLine(/^READY /, { timeoutMs: 30_000 });
  return child;
}

beforeAll(async () => {
  serverA = await startServer();
  serverB = await startServer();
  ncA = await connect(serverA.connectOptions());
  ncB = await connect(serverB.connectOptions());
  const callee = spawnNode(serverB, "callee", ["--http-port", "0"]);
  const line = await callee.waitForLine(/^A2A agents at /, { timeoutMs: 30_000 });
  const base = /^A2A agents at (\S+)\/a2a\//.exec(line)![1]!;
  apiB = new RunwayClient(ncB, "b");
  await apiB.createTenant("b");
  await apiB.putDefinition({ name: "nap", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: "${input.ms}" } }], result: "${steps.s.output}" });
  expect((await apiB.exposeAgent({ definition: "nap" })).outcome).toBe("exposed");
  const key = await apiB.createKey({ name: "tenant-a" });
  expect(key.outcome).toBe("created");
  credentials = join(mkdtempSync(join(tmpdir(), "rw-a2a-creds-")), "credentials.json");
  writeFileSync(credentials, JSON.stringify({ "a/remote": key.token }), { mode: 0o600 });
  await apiB.putDefinition({
    name: "hold",
    nodes: [
      { id: "gate", kind: "wait", signal: "go", timeout_ms: 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
    ],
    result: "${steps.after.output}",
  });
  expect((await apiB.exposeAgent({ definition: "hold" })).outcome).toBe("exposed");
  card = `${base}/a2a/b/nap/.well-known/agent-card.json`;
  callerNode = await caller();
  apiA = new RunwayClient(ncA, "a");
  await apiA.createTenant("a");
  const calls = (name: string, agent: string, auth?: string) => ({
    name,
    nodes: [
      {
        id: "call",
        kind: "a2a",
        agent,
        ...(auth ? { auth } : {}),
        message: { ms: "${input.ms}" },
        retry: { max_attempts: 2, backoff_ms: 100, max_backoff_ms: 100 },
      },
    ],
    result: "${steps.call.output}",
  });
  expect((await apiA.putDefinition(calls("ask-b", card, "remote"))).outcome).toBe("published");
  expect((await apiA.putDefinition(calls("ask-nobody", card.replace("/nap/", "/nobody/"), "remote"))).outcome).toBe("published");
  expect((await apiA.putDefinition(calls("ask-unkeyed", card, "missing"))).outcome).toBe("published");
  expect((await apiA.putDefinition(calls("ask-hold", card.replace("/nap/", "/hold/"), "remote"))).outcome).toBe("published");
}, 90_000);

afterAll(async () => {
  for (const c of children) await c.kill().catch(() => undefined);
  await ncA?.close();
  await ncB?.close();
  await serverA?.dispose();
  await serverB?.dispose();
});

/** The remote task id, once the run journaled it (`tool_task_started`). */
function taskStarted(run: string): Promise<string> {
  return waitFor(async () => ((await apiA.runEvents(run)).events as { type: string; task?: string }[]).find((e) => e.type === "tool_task_started")?.task, {
    timeoutMs: 30_000,
    describe: "the remote task id to be journaled",
  });
}

async function runsOfB(): Promise<{ id: string; status: string }[]> {
  return (await apiB.listRuns({ limit: 500 })).runs as { id: string; status: string }[];
}

it("39.5 an a2a step calls another deployment's agent, survives a SIGKILL of the calling node (one remote task), and cancels the remote task when its run is cancelled", async () => {
  const run = ((await apiA.startRun({ definition: "ask-b", input: { ms: 6_000 } })).run as RunAnswer).id;
  const task = await taskStarted(run);
  await callerNode.kill("SIGKILL");
  callerNode = await caller();
  const done = await finished(apiA, run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ task, result: "slept" });
  // One remote task, the one journaled before the kill.
  expect((await runsOfB()).map((r) => [r.id, r.status])).toEqual([[task, "succeeded"]]);
  expect(((await apiA.runEvents(run)).events as { type: string; task?: string }[]).filter((e) => e.type === "tool_task_started").map((e) => e.task)).toEqual([
    task,
  ]);

  // Cancelled while the remote task works: the remote task is cancelled too.
  const long = ((await apiA.startRun({ definition: "ask-b", input: { ms: 120_000 } })).run as RunAnswer).id;
  const remote = await taskStarted(long);
  expect((await apiA.cancelRun(long, "test")).outcome).toMatch(/cancel/);
  await waitFor(async () => ((await apiB.getRun(remote)).run as RunAnswer).status === "cancelled" || undefined, {
    timeoutMs: 30_000,
    describe: "the remote task's run to be cancelled",
  });
}, 180_000);

it("39.5 bad input: an agent that does not exist, or a credential the node does not hold, fails the step with a typed code; no remote run is made", async () => {
  const before = (await runsOfB()).length;
  const nobody = await finished(apiA, ((await apiA.startRun({ definition: "ask-nobody", input: { ms: 1 } })).run as RunAnswer).id);
  expect(nobody.status).toBe("failed");
  expect(JSON.stringify(nobody)).toContain("a2a_agent_not_found");
  const unkeyed = await finished(apiA, ((await apiA.startRun({ definition: "ask-unkeyed", input: { ms: 1 } })).run as RunAnswer).id);
  expect(unkeyed.status).toBe("failed");
  expect(JSON.stringify(unkeyed)).toContain("a2a_credential_not_found");
  expect((await runsOfB()).length).toBe(before);
}, 90_000);

it("39.2 a2a step: the calling node SIGKILLed while the remote task's question waits in the run's inbox loses nothing; answered after the restart, the same remote task completes", async () => {
  const before = (await runsOfB()).length;
  const run = ((await apiA.startRun({ definition: "ask-hold", input: { ms: 1 } })).run as RunAnswer).id;
  const task = await taskStarted(run);
  const pending = () =>
    waitFor(async () => ((await apiA.approvals({ run_id: run })).approvals as { id: string; kind: string }[])[0], {
      timeoutMs: 30_000,
      describe: "the remote question in the calling run's inbox",
    });
  const item = await pending();
  expect(item.kind).toBe("input");
  await callerNode.kill("SIGKILL");
  callerNode = await caller();
  expect((await pending()).id).toBe(item.id);
  expect((await apiA.decide(item.id, "approve", { payload: { value: 42 } })).outcome).toBe("decided");
  const done = await finished(apiA, run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ task, result: { value: 42 } });
  // One remote task, answered once.
  const remote = await runsOfB();
  expect(remote.length).toBe(before + 1);
  expect(remote.find((r) => r.id === task)?.status).toBe("succeeded");
}, 180_000);

it("39.2 a2a step: the calling node SIGKILLed right after the remote question is answered (its follow-up sent or not): the answer's attempt is made again with the answer, the person is not asked again, the remote task takes it once (a resend has the same messageId) and the step completes", async () => {
  const before = (await runsOfB()).length;
  const run = ((await apiA.startRun({ definition: "ask-hold", input: { ms: 1 } })).run as RunAnswer).id;
  const task = await taskStarted(run);
  const item = await waitFor(async () => ((await apiA.approvals({ run_id: run })).approvals as { id: string }[])[0], {
    timeoutMs: 30_000,
    describe: "the remote question in the calling run's inbox",
  });
  expect((await apiA.decide(item.id, "approve", { payload: { value: 7 } })).outcome).toBe("decided");
  await callerNode.kill("SIGKILL");
  callerNode = await caller();
  const done = await finished(apiA, run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ task, result: { value: 7 } });
  const remote = await runsOfB();
  expect(remote.length).toBe(before + 1);
  // The remote run was signalled once.
  expect(((await apiB.runEvents(task)).events as { type: string }[]).filter((e) => e.type === "signal_received").length).toBe(1);
  // The person was asked once: an answering attempt lost with its node is made again with the answer.
  expect(((await apiA.runEvents(run)).events as { type: string }[]).filter((e) => e.type === "input_requested").length).toBe(1);
}, 180_000);
