import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  SendMessageRequest,
  StreamResponse,
  TaskPushNotificationConfig,
  TaskState,
  type Task,
} from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { Kvm } from "@nats-io/kv";
import { waitFor } from "../harness/index.js";
import { workflowWorld } from "./workflow-support.js";

const world = workflowWorld({ name: "a2a-push", http: { port: 0, push: { retryBaseMs: 50, retryMaxMs: 200, pollMs: 200 } } });

/** What a webhook was POSTed, in arrival order: every try, with the status it was answered. */
interface Hit {
  path: string;
  headers: IncomingHttpHeaders;
  update: string;
  status: number;
}

/** A webhook receiver in this process: answers 200, or 500 to the first `failures[path]` POSTs of a path. */
const hits: Hit[] = [];
const failures = new Map<string, number>();
let receiver: Server;
let hook = "";

function describe(body: string): string {
  const e = StreamResponse.fromJSON(JSON.parse(body));
  const p = e.payload!;
  if (p.$case === "statusUpdate") return `status:${TaskState[p.value.status!.state]}`;
  if (p.$case === "artifactUpdate") return `artifact:${p.value.artifact!.artifactId}`;
  return p.$case;
}

/** The updates a path took (answered 200), in order. */
const taken = (path: string) => hits.filter((h) => h.path === path && h.status === 200).map((h) => h.update);
const tried = (path: string) => hits.filter((h) => h.path === path);

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = req.url ?? "";
      const left = failures.get(path) ?? 0;
      const status = left > 0 ? 500 : 200;
      if (left > 0) failures.set(path, left - 1);
      hits.push({ path, headers: req.headers, update: describe(Buffer.concat(chunks).toString()), status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  for (const [tenant, api] of [
    ["t1", world.client],
    ["t2", world.clientFor("t2")],
  ] as const) {
    for (const def of [
      { name: "nap", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: "${input.ms}" } }], result: "${steps.s.output}" },
      {
        name: "hold",
        nodes: [
          { id: "gate", kind: "wait", signal: "go", timeout_ms: 3_600_000 },
          { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
        ],
        result: "${steps.after.output}",
      },
    ]) {
      expect((await api.putDefinition(def)).outcome, tenant).toMatch(/published|unchanged/);
      expect((await api.exposeAgent({ definition: def.name, public: true })).outcome).toBe("exposed");
    }
  }
}, 30_000);

afterAll(async () => {
  await new Promise<void>((resolve) => {
    receiver?.close(() => resolve());
    receiver?.closeAllConnections();
  });
});

let sequence = 0;
const messageId = () => `p-${process.pid}-${Date.now()}-${sequence++}`;

function send(data: unknown, options: { taskId?: string; returnImmediately?: boolean; push?: Record<string, unknown> } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId: messageId(), role: "ROLE_USER", ...(options.taskId ? { taskId: options.taskId } : {}), parts: [{ data }] },
    configuration: { returnImmediately: options.returnImmediately ?? true, ...(options.push ? { taskPushNotificationConfig: options.push } : {}) },
  });
}

function clientFor(agent: string, tenant = "t1", transport: "JSONRPC" | "HTTP+JSON" = "JSONRPC"): Promise<Client> {
  return new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [transport] })).createFromUrl(
    `${world.node.httpUrl!}/a2a/${tenant}/${agent}/`,
  );
}

async function start(client: Client, data: unknown, push?: Record<string, unknown>): Promise<Task> {
  const task = (await client.sendMessage(send(data, push ? { push } : {}))) as Task;
  expect(task.id).toMatch(/^t\d_/);
  return task;
}

const config = (taskId: string, path: string, extra: Record<string, unknown> = {}) =>
  TaskPushNotificationConfig.fromJSON({ taskId, url: `${hook}${path}`, ...extra });

function until(path: string, update: string, what: string): Promise<true> {
  return waitFor(() => taken(path).includes(update) || undefined, { timeoutMs: 30_000, describe: `${what}: ${update} at ${path}` });
}

it("39.1 push a config created on a task under way: the receiver gets working, the result and completed, in order, with the token and authorization headers", async () => {
  const client = await clientFor("nap");
  const task = await start(client, { ms: 1_500 });
  expect(task.status?.state).toBe(TaskState.TASK_STATE_WORKING);
  const created = await client.createTaskPushNotificationConfig(
    config(task.id, "/first", { id: "first", token: "tok-1", authentication: { scheme: "Bearer", credentials: "secret-1" } }),
  );
  // The credentials are sent, never shown again.
  expect(created).toMatchObject({ id: "first", taskId: task.id, url: `${hook}/first`, token: "tok-1", authentication: { scheme: "Bearer", credentials: "" } });
  await until("/first", "status:TASK_STATE_COMPLETED", "the task's end");
  expect(taken("/first")).toEqual(["status:TASK_STATE_WORKING", "artifact:result", "status:TASK_STATE_COMPLETED"]);
  for (const h of tried("/first")) {
    expect(h.headers["x-a2a-notification-token"]).toBe("tok-1");
    expect(h.headers.authorization).toBe("Bearer secret-1");
    expect(h.headers["content-type"]).toBe("application/a2a+json");
  }
}, 60_000);

it("39.1 push a config given in SendMessage's configuration is delivered from the run's start, over REST as over JSON-RPC", async () => {
  for (const transport of ["JSONRPC", "HTTP+JSON"] as const) {
    const path = `/in-send-${transport === "JSONRPC" ? "rpc" : "rest"}`;
    const client = await clientFor("nap", "t1", transport);
    const task = await start(client, { ms: 10 }, { url: `${hook}${path}`, token: "tok-2" });
    await until(path, "status:TASK_STATE_COMPLETED", transport);
    expect(taken(path)).toEqual(["status:TASK_STATE_WORKING", "artifact:result", "status:TASK_STATE_COMPLETED"]);
    expect(tried(path).every((h) => h.headers["x-a2a-notification-token"] === "tok-2")).toBe(true);
    // The config is the task's, listed under it.
    const listed = await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }));
    expect(listed.configs.map((c) => c.url)).toEqual([`${hook}${path}`]);
  }
}, 60_000);

it("39.1 push a receiver that answers 500 twice then 200 still gets every update once, in order, after retries", async () => {
  failures.set("/flaky", 2);
  const client = await clientFor("nap");
  await start(client, { ms: 10 }, { url: `${hook}/flaky` });
  await until("/flaky", "status:TASK_STATE_COMPLETED", "the flaky receiver");
  expect(taken("/flaky")).toEqual(["status:TASK_STATE_WORKING", "artifact:result", "status:TASK_STATE_COMPLETED"]);
  // The first update was tried three times: twice refused, then taken; nothing came before it.
  expect(tried("/flaky").map((h) => `${h.status} ${h.update}`)).toEqual([
    "500 status:TASK_STATE_WORKING",
    "500 status:TASK_STATE_WORKING",
    "200 status:TASK_STATE_WORKING",
    "200 artifact:result",
    "200 status:TASK_STATE_COMPLETED",
  ]);
}, 60_000);

it("39.1 push list, get and delete a task's configs; a deleted config gets nothing more", async () => {
  const client = await clientFor("hold");
  const task = await start(client, { n: 1 });
  await client.createTaskPushNotificationConfig(config(task.id, "/keep", { id: "keep" }));
  await client.createTaskPushNotificationConfig(config(task.id, "/drop", { id: "drop", token: "t" }));
  const listed = await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }));
  expect(listed.configs.map((c) => c.id).sort()).toEqual(["drop", "keep"]);
  const paged = await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id, pageSize: 1 }));
  expect(paged.configs).toHaveLength(1);
  expect(paged.nextPageToken).not.toBe("");
  const rest = await client.listTaskPushNotificationConfig(
    ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id, pageSize: 1, pageToken: paged.nextPageToken }),
  );
  expect([...paged.configs, ...rest.configs].map((c) => c.id).sort()).toEqual(["drop", "keep"]);
  expect(rest.nextPageToken).toBe("");
  expect(await client.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "drop" }))).toMatchObject({
    id: "drop",
    url: `${hook}/drop`,
    token: "t",
  });
  // Both are told the task waits (its snapshot), then one is deleted.
  await until("/keep", "status:TASK_STATE_INPUT_REQUIRED", "the snapshot");
  await until("/drop", "status:TASK_STATE_INPUT_REQUIRED", "the snapshot");
  await client.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "drop" }));
  const dropped = tried("/drop").length;
  await expect(client.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "drop" }))).rejects.toMatchObject({
    name: "TaskNotFoundError",
  });
  await expect(
    client.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "drop" })),
  ).rejects.toMatchObject({
    name: "TaskNotFoundError",
  });
  expect((await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }))).configs.map((c) => c.id)).toEqual([
    "keep",
  ]);
  // The follow-up message is the signal the run waits for: it completes.
  await client.sendMessage(send({ go: true }, { taskId: task.id }));
  await until("/keep", "status:TASK_STATE_COMPLETED", "the task's end");
  expect(taken("/keep")).toEqual(["status:TASK_STATE_INPUT_REQUIRED", "status:TASK_STATE_WORKING", "artifact:result", "status:TASK_STATE_COMPLETED"]);
  expect(tried("/drop")).toHaveLength(dropped);
  expect(taken("/drop")).toEqual(["status:TASK_STATE_INPUT_REQUIRED"]);
}, 60_000);

it("39.1 push bad configs get A2A errors: a bad URL InvalidParams, an unknown task or another tenant's TaskNotFound; a bad one in SendMessage starts no run", async () => {
  const client = await clientFor("hold");
  const task = await start(client, { n: 2 });
  for (const url of ["ftp://127.0.0.1/x", "http://example.com/hook", "not a url", "https://user:pw@example.com/hook", ""])
    await expect(client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: task.id, url })), url).rejects.toMatchObject({
      name: "RequestMalformedError",
    });
  await expect(client.createTaskPushNotificationConfig(config(task.id, "/x", { id: "no spaces allowed" }))).rejects.toMatchObject({
    name: "RequestMalformedError",
  });
  await expect(client.createTaskPushNotificationConfig(config("t1_nosuchtask", "/x"))).rejects.toMatchObject({ name: "TaskNotFoundError" });
  // A task of tenant t2, asked of t1's agent: not found.
  const other = await start(await clientFor("hold", "t2"), { n: 3 });
  await expect(client.createTaskPushNotificationConfig(config(other.id, "/x"))).rejects.toMatchObject({ name: "TaskNotFoundError" });
  await expect(client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: other.id }))).rejects.toMatchObject({
    name: "TaskNotFoundError",
  });
  // The same over REST, as its google.rpc.Status bodies.
  const rest = async (taskId: string, body: unknown) => {
    const res = await fetch(`${world.node.httpUrl!}/a2a/t1/hold/tasks/${taskId}/pushNotificationConfigs`, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { error: { status: string } } };
  };
  expect(await rest(task.id, { url: "http://example.com/hook" })).toMatchObject({ status: 400, body: { error: { status: "INVALID_ARGUMENT" } } });
  expect(await rest(other.id, { url: `${hook}/x` })).toMatchObject({ status: 404, body: { error: { status: "NOT_FOUND" } } });
  const ok = await rest(task.id, { url: `${hook}/rest`, id: "rest" });
  expect(ok.status).toBe(201);
  // A SendMessage whose config is refused is refused whole: no task, no run.
  const before = ((await world.client.listRuns({ limit: 500 })).runs as unknown[]).length;
  await expect(client.sendMessage(send({ n: 4 }, { push: { url: "http://example.com/hook" } }))).rejects.toMatchObject({ name: "RequestMalformedError" });
  expect(((await world.client.listRuns({ limit: 500 })).runs as unknown[]).length).toBe(before);
}, 60_000);

it("39.1 push a receiver that refuses every try: the config is given up after its 20 tries; created again, its delivery goes on from where it stopped", async () => {
  failures.set("/down", 1_000);
  const client = await clientFor("nap");
  const task = await start(client, { ms: 10 }, { id: "down", url: `${hook}/down` });
  const kv = await new Kvm(world.nc).open("rw_a2a_push");
  const delivery = async () => (await kv.get(`d.t1.nap.${task.id}.down`))?.json<{ gave_up?: { reason: string }; lease?: unknown }>();
  await waitFor(async () => (await delivery())?.gave_up, { timeoutMs: 30_000, describe: "the delivery given up" });
  expect((await delivery())?.gave_up?.reason).toBe("HTTP 500");
  expect(tried("/down").map((h) => `${h.status} ${h.update}`)).toEqual(Array.from({ length: 20 }, () => "500 status:TASK_STATE_WORKING"));
  failures.set("/down", 0);
  await client.createTaskPushNotificationConfig(config(task.id, "/down", { id: "down" }));
  await until("/down", "status:TASK_STATE_COMPLETED", "the delivery resumed");
  expect(taken("/down")).toEqual(["status:TASK_STATE_WORKING", "artifact:result", "status:TASK_STATE_COMPLETED"]);
}, 60_000);
