import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Kvm } from "@nats-io/kv";
import { SendMessageRequest, StreamResponse, TaskState, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { RunwayClient } from "../../cluster/client.js";
import { RUNWAY_USER, spawnTsx, waitFor, type ChildHandle } from "../harness/index.js";
import { singleServerWorld } from "./node-process.js";

const world = singleServerWorld();
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

/** `runway node` serving HTTP: its A2A base URL as it prints it. */
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

/** The receiver: each POST's update and the status it was answered (500 while `failing` > 0). */
const hits: { update: string; status: number }[] = [];
let failing = 0;
let receiver: Server;
let hook = "";

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const p = StreamResponse.fromJSON(JSON.parse(Buffer.concat(chunks).toString())).payload!;
      const update = p.$case === "statusUpdate" ? `status:${TaskState[p.value.status!.state]}` : p.$case === "artifactUpdate" ? "artifact" : p.$case;
      const status = failing > 0 ? 500 : 200;
      if (failing > 0) failing--;
      hits.push({ update, status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => {
    receiver?.close(() => resolve());
    receiver?.closeAllConnections();
  });
});

const taken = () => hits.filter((h) => h.status === 200).map((h) => h.update);

it("39.1 push a node SIGKILLed while it retries an update, and again between updates, is restarted: the rest is delivered, each update taken once, in order", async () => {
  const name = "a2a-push-node";
  let a = await node(name);
  const api = new RunwayClient(world.nc, "p1");
  await api.createTenant("p1");
  await api.putDefinition({
    name: "hold",
    nodes: [
      { id: "gate", kind: "wait", signal: "go", timeout_ms: 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
    ],
    result: "${steps.after.output}",
  });
  expect((await api.exposeAgent({ definition: "hold", public: true })).outcome).toBe("exposed");
  const client = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ["JSONRPC"] })).createFromUrl(
    `${a.url}/a2a/p1/hold/`,
  );
  // The receiver refuses the first tries: the node dies while it retries the first update.
  failing = 3;
  const task = (await client.sendMessage(
    SendMessageRequest.fromJSON({
      message: { messageId: "m-chaos", role: "ROLE_USER", parts: [{ data: { n: 1 } }] },
      configuration: { returnImmediately: true, taskPushNotificationConfig: { id: "hook", url: hook, token: "tok" } },
    }),
  )) as Task;
  await waitFor(() => hits.length >= 1 || undefined, { timeoutMs: 30_000, describe: "a first, refused, POST" });
  await a.child.kill("SIGKILL");
  expect(taken()).toEqual([]);
  a = await node(name);
  await waitFor(() => taken().includes("status:TASK_STATE_INPUT_REQUIRED") || undefined, { timeoutMs: 60_000, describe: "input-required after the restart" });
  // Between updates: once the delivery of input-required is stored, the node dies again.
  const kv = await new Kvm(world.nc).open("rw_a2a_push");
  await waitFor(
    async () => {
      const e = await kv.get(`d.p1.hold.${task.id}.hook`);
      return e?.json<{ sent: { state: number } | null }>().sent?.state === TaskState.TASK_STATE_INPUT_REQUIRED || undefined;
    },
    { timeoutMs: 30_000, describe: "the input-required delivery stored" },
  );
  await a.child.kill("SIGKILL");
  a = await node(name);
  await waitFor(async () => (await api.signal(task.id, "go", { ok: true })).outcome === "delivered" || undefined, {
    timeoutMs: 60_000,
    describe: "the run signalled after the restart",
  });
  await waitFor(() => taken().includes("status:TASK_STATE_COMPLETED") || undefined, { timeoutMs: 60_000, describe: "completed" });
  expect(taken()).toEqual([
    "status:TASK_STATE_WORKING",
    "status:TASK_STATE_INPUT_REQUIRED",
    "status:TASK_STATE_WORKING",
    "artifact",
    "status:TASK_STATE_COMPLETED",
  ]);
  expect(hits.filter((h) => h.status === 500).every((h) => h.update === "status:TASK_STATE_WORKING")).toBe(true);
  await a.child.kill("SIGTERM");
}, 180_000);

it("39.1 push two nodes: the one delivering a config is SIGKILLed; the other takes the delivery over once its lease lapsed and delivers the rest, each update once, in order", async () => {
  hits.length = 0;
  failing = 0;
  const nodes = { "a2a-push-x": await node("a2a-push-x"), "a2a-push-y": await node("a2a-push-y") };
  const api = new RunwayClient(world.nc, "p2");
  await api.createTenant("p2");
  await api.putDefinition({
    name: "hold",
    nodes: [
      { id: "gate", kind: "wait", signal: "go", timeout_ms: 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
    ],
    result: "${steps.after.output}",
  });
  expect((await api.exposeAgent({ definition: "hold", public: true })).outcome).toBe("exposed");
  const client = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ["HTTP+JSON"] })).createFromUrl(
    `${nodes["a2a-push-x"].url}/a2a/p2/hold/`,
  );
  const task = (await client.sendMessage(
    SendMessageRequest.fromJSON({
      message: { messageId: "m-two", role: "ROLE_USER", parts: [{ data: { n: 2 } }] },
      configuration: { returnImmediately: true, taskPushNotificationConfig: { id: "hook", url: hook } },
    }),
  )) as Task;
  const kv = await new Kvm(world.nc).open("rw_a2a_push");
  const owner = await waitFor(
    async () => {
      const d = (await kv.get(`d.p2.hold.${task.id}.hook`))?.json<{ sent: { state: number } | null; lease?: { owner: string } }>();
      return d?.sent?.state === TaskState.TASK_STATE_INPUT_REQUIRED ? d.lease?.owner : undefined;
    },
    { timeoutMs: 30_000, describe: "the input-required delivery stored, and its lease holder" },
  );
  expect(Object.keys(nodes)).toContain(owner);
  await nodes[owner as keyof typeof nodes].child.kill("SIGKILL");
  const other = Object.keys(nodes).find((n) => n !== owner)!;
  await waitFor(async () => (await api.signal(task.id, "go", { ok: true })).outcome === "delivered" || undefined, {
    timeoutMs: 60_000,
    describe: "the run signalled on the node left",
  });
  await waitFor(() => taken().includes("status:TASK_STATE_COMPLETED") || undefined, { timeoutMs: 60_000, describe: "completed, from the node left" });
  expect(taken()).toEqual([
    "status:TASK_STATE_WORKING",
    "status:TASK_STATE_INPUT_REQUIRED",
    "status:TASK_STATE_WORKING",
    "artifact",
    "status:TASK_STATE_COMPLETED",
  ]);
  // The delivery is done, by the node left (done is stored after the last POST was taken).
  const last = await waitFor(
    async () => {
      const d = (await kv.get(`d.p2.hold.${task.id}.hook`))?.json<{ lease?: { owner: string }; done?: boolean }>();
      return d?.done ? d : undefined;
    },
    { timeoutMs: 30_000, describe: "the delivery done" },
  );
  expect(last.lease?.owner).toBe(other);
  await nodes[other as keyof typeof nodes].child.kill("SIGTERM");
}, 180_000);
