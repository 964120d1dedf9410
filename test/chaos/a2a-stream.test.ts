import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { SendMessageRequest, SubscribeToTaskRequest, TaskState, type StreamResponse } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { RunwayClient } from "../../cluster/client.js";
import { RUNWAY_USER, spawnTsx, waitFor, type ChildHandle } from "../harness/index.js";
import { singleServerWorld } from "./node-process.js";

const world = singleServerWorld();
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

/** `runway node` with an HTTP port of its own; its A2A base URL as it prints it. */
async function node(name: string): Promise<{ child: ChildHandle; url: string }> {
  const child = spawnTsx(
    cli,
    [
      "node",
      ...["--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass],
      ...["--name", name, "--handlers", handlers, "--lease-ttl-ms", "2000", "--http-port", "0"],
    ],
    { name, env: { RUNWAY_LOG: "warn" } },
  );
  world.children.push(child);
  const line = await child.waitForLine(/^A2A agents at /, { timeoutMs: 30_000 });
  return { child, url: /^A2A agents at (\S+)\/a2a\//.exec(line)![1]! };
}

function clientOf(base: string, tenant: string, transport: "JSONRPC" | "HTTP+JSON"): Promise<Client> {
  return new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [transport] })).createFromUrl(
    `${base}/a2a/${tenant}/nap/`,
  );
}

const describe = (e: StreamResponse): string => {
  const p = e.payload!;
  if (p.$case === "task") return `task:${TaskState[p.value.status!.state]}`;
  if (p.$case === "statusUpdate") return `status:${TaskState[p.value.status!.state]}`;
  if (p.$case === "artifactUpdate") return `artifact:${p.value.artifact!.artifactId}`;
  return "message";
};

it.each(["JSONRPC", "HTTP+JSON"] as const)(
  "A2A-4 over %s: the node serving a streaming task is SIGKILLed; the client resubscribes through another node and gets the rest, in order, with no duplicate",
  async (transport) => {
    const a = await node(`a2a-a-${transport === "JSONRPC" ? "rpc" : "rest"}`);
    const b = await node(`a2a-b-${transport === "JSONRPC" ? "rpc" : "rest"}`);
    const tenant = transport === "JSONRPC" ? "s1" : "s2";
    const api = new RunwayClient(world.nc, tenant);
    await api.createTenant(tenant);
    await api.putDefinition({ name: "nap", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: "${input.ms}" } }], result: "${steps.s.output}" });
    expect((await api.exposeAgent({ definition: "nap", public: true })).outcome).toBe("exposed");

    const viaA = await clientOf(a.url, tenant, transport);
    const request = SendMessageRequest.fromJSON({ message: { messageId: `m-${transport}`, role: "ROLE_USER", parts: [{ data: { ms: 3_000 } }] } });
    const before: string[] = [];
    let id = "";
    const stream = viaA.sendMessageStream(request);
    const first = await stream.next();
    before.push(describe(first.value!));
    if (first.value!.payload!.$case === "task") id = first.value!.payload!.value.id;
    expect(id).not.toBe("");
    // The node serving the stream dies; the stream breaks.
    await a.child.kill("SIGKILL");
    await expect(
      (async () => {
        for await (const e of stream) before.push(describe(e));
      })(),
    ).rejects.toBeDefined();

    const viaB = await clientOf(b.url, tenant, transport);
    const after: string[] = [];
    for await (const e of viaB.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id }))) after.push(describe(e));
    // The same task as it is now, then the rest of it, each once, in order: its result, then its end.
    expect(after[0]).toBe("task:TASK_STATE_WORKING");
    expect(after.slice(1)).toEqual(["artifact:result", "status:TASK_STATE_COMPLETED"]);
    expect(before).toEqual(["task:TASK_STATE_WORKING"]);
    // One run.
    const runs = ((await api.listRuns({ limit: 500 })).runs as { id: string; status: string; definition: { name: string } }[]).filter(
      (r) => r.definition.name === "nap",
    );
    expect(runs.map((r) => [r.id, r.status])).toEqual([[id, "succeeded"]]);
    await b.child.kill("SIGTERM");
  },
  120_000,
);

it("A2A-4 a blocking SendMessage whose node is SIGKILLed is resumed by sending the same message through another node: the same task, completed, one run", async () => {
  const a = await node("a2a-a-blocking");
  const b = await node("a2a-b-blocking");
  const api = new RunwayClient(world.nc, "s3");
  await api.createTenant("s3");
  await api.putDefinition({ name: "nap", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: "${input.ms}" } }], result: "${steps.s.output}" });
  expect((await api.exposeAgent({ definition: "nap", public: true })).outcome).toBe("exposed");
  const request = () => SendMessageRequest.fromJSON({ message: { messageId: "m-blocking", role: "ROLE_USER", parts: [{ data: { ms: 3_000 } }] } });
  // Settled as soon as it is made: the kill rejects it before the test looks at it.
  const pending = (await clientOf(a.url, "s3", "JSONRPC")).sendMessage(request()).then(
    () => "answered",
    () => "refused",
  );
  await waitFor(async () => ((await api.listRuns({ limit: 10 })).runs as unknown[]).length === 1, { timeoutMs: 20_000, describe: "the blocking call's run" });
  await a.child.kill("SIGKILL");
  expect(await pending).toBe("refused");
  const task = (await (await clientOf(b.url, "s3", "JSONRPC")).sendMessage(request())) as { id: string; status?: { state: number } };
  expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  const runs = (await api.listRuns({ limit: 500 })).runs as { id: string; status: string }[];
  expect(runs.map((r) => [r.id, r.status])).toEqual([[task.id, "succeeded"]]);
  await b.child.kill("SIGTERM");
}, 120_000);
