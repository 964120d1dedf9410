import { get } from "node:http";
import { describe, expect, it, beforeAll } from "vitest";
import {
  GetTaskRequest,
  ListTasksRequest,
  CancelTaskRequest,
  SubscribeToTaskRequest,
  SendMessageRequest,
  TaskState,
  type StreamResponse,
  type Task,
} from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { fileURLToPath } from "node:url";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { workflowWorld } from "./workflow-support.js";
import { AgentStore } from "../../gateways/index.js";

// A task's waiting call reads its run's journal only every 10 minutes here: each test's task moves on
// the run's live events alone, so one missed (a watch subscribed after the events it waits for) hangs it.
const world = workflowWorld({ name: "a2a-node", http: { port: 0, taskPollMs: 600_000 } });
let base = "";

const DEFINITIONS = [
  { name: "greet", description: "Echoes what it is sent", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }], result: "${steps.e.output}" },
  { name: "nap", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: "${input.ms}" } }], result: "${steps.s.output}" },
  {
    name: "gate",
    nodes: [
      { id: "gate", kind: "approval", prompt: "Ship it?", payload: "${input}", group: "ops", timeout_ms: 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
    ],
    result: "${steps.after.output}",
  },
  {
    name: "hold",
    nodes: [
      { id: "gate", kind: "wait", signal: "go", timeout_ms: 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
    ],
    result: "${steps.after.output}",
  },
];

beforeAll(async () => {
  base = world.node.httpUrl!;
  for (const def of DEFINITIONS) {
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    expect((await world.client.exposeAgent({ definition: def.name, public: true })).outcome).toBe("exposed");
  }
}, 30_000);

let sequence = 0;
const messageId = () => `m-${process.pid}-${Date.now()}-${sequence++}`;

function send(data: unknown, options: { id?: string; returnImmediately?: boolean; taskId?: string; text?: string } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: options.id ?? messageId(),
      role: "ROLE_USER",
      ...(options.taskId ? { taskId: options.taskId } : {}),
      parts: options.text !== undefined ? [{ text: options.text }] : [{ data }],
    },
    configuration: { returnImmediately: options.returnImmediately ?? false },
  });
}

async function clientFor(agent: string, transport: "JSONRPC" | "HTTP+JSON"): Promise<Client> {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [transport] }));
  return factory.createFromUrl(`${base}/a2a/t1/${agent}/`);
}

function asTask(result: unknown): Task {
  expect(result).toHaveProperty("status");
  return result as Task;
}

/** A GET with these headers: fetch marks conditional requests `cache-control: no-cache`, which a server rightly answers in full. */
function getStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { headers }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    }).on("error", reject);
  });
}

async function collect(stream: AsyncGenerator<StreamResponse>): Promise<StreamResponse[]> {
  const out: StreamResponse[] = [];
  for await (const e of stream) out.push(e);
  return out;
}

it("an agent's exposure as every node reads it (from memory): another node's expose and hide hold once its watch hears them, its own at once", async () => {
  const mine = new AgentStore(world.nc);
  const other = new AgentStore(world.nc);
  await Promise.all([mine.start(), other.start()]);
  try {
    expect(await mine.get("t1", "watched")).toBeUndefined();
    await other.put("t1", { name: "watched", definition: "greet", public: true, exposed_at: 1 });
    expect(await other.get("t1", "watched")).toMatchObject({ definition: "greet" });
    await waitFor(async () => (await mine.get("t1", "watched")) ?? undefined, { timeoutMs: 5_000, describe: "the expose to reach the other store" });
    expect(await other.hide("t1", "watched")).toBe(true);
    expect(await other.get("t1", "watched")).toBeUndefined();
    await waitFor(async () => ((await mine.get("t1", "watched")) === undefined ? true : undefined), {
      timeoutMs: 5_000,
      describe: "the hide to reach the other store",
    });
  } finally {
    await Promise.all([mine.close(), other.close()]);
  }
});

it("runway agents expose, ls and hide: an agent's card is served while it is exposed", async () => {
  const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
  const runway = async (args: string[]) => {
    const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"], {
      name: `runway ${args.join(" ")}`,
    });
    const exit = await child.exited;
    return { code: exit.code, out: child.lines.join("\n") };
  };
  const card = `${base}/a2a/t1/greeter/.well-known/agent-card.json`;
  expect((await fetch(card)).status).toBe(404);
  const exposed = await runway(["agents", "expose", "greet", "--name", "greeter", "--description", "Says it back", "--public"]);
  expect(exposed.code).toBe(0);
  expect(JSON.parse(exposed.out)).toMatchObject({ outcome: "exposed", agent: { name: "greeter", definition: "greet", public: true } });
  expect(((await (await fetch(card)).json()) as { description: string }).description).toBe("Says it back");
  const listed = await runway(["agents", "ls"]);
  expect((JSON.parse(listed.out) as { agents: { name: string }[] }).agents.map((a) => a.name)).toContain("greeter");
  expect((await runway(["agents", "hide", "greeter"])).code).toBe(0);
  expect((await fetch(card)).status).toBe(404);
  const again = await runway(["agents", "hide", "greeter"]);
  expect(again.code).toBe(1);
  expect(again.out).toMatch(/agent_not_found/);
  expect((await runway(["agents", "expose", "nothing-here"])).out).toMatch(/definition_not_found/);
}, 60_000);

describe.each(["JSONRPC", "HTTP+JSON"] as const)("A2A over %s", (transport) => {
  it("A2A-3 a start its tenant refuses is a rejected task, with no run; a resend answers the same rejected task", async () => {
    const tenant = transport === "JSONRPC" ? "r1" : "r2";
    const api = world.clientFor(tenant);
    await api.createTenant(tenant);
    expect((await api.putDefinition(DEFINITIONS[0]!)).outcome).toMatch(/published|unchanged/);
    expect((await api.exposeAgent({ definition: "greet", public: true })).outcome).toBe("exposed");
    expect((await api.setTenantState(tenant, "kill", "test")).outcome).toBe("killed");
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [transport] }));
    const client = await factory.createFromUrl(`${base}/a2a/${tenant}/greet/`);
    const id = messageId();
    const task = asTask(await client.sendMessage(send({ x: 1 }, { id })));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(task.status?.message?.parts[0]!.content).toEqual({ $case: "text", value: "tenant_killed" });
    expect((await client.getTask(GetTaskRequest.fromJSON({ id: task.id }))).status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(asTask(await client.sendMessage(send({ x: 1 }, { id }))).id).toBe(task.id);
    expect((await api.getRun(task.id)).outcome).toBe("run_not_found");
  });

  it("A2A-1 card fetch: skills from the definition, protocol 1.0, both bindings, ETag and Last-Modified with 304", async () => {
    const url = `${base}/a2a/t1/greet/.well-known/agent-card.json`;
    const res = await fetch(url);
    expect(res.status).toBe(200);
    const card = (await res.json()) as Record<string, unknown>;
    expect(card).toMatchObject({
      name: "greet",
      description: "Echoes what it is sent",
      capabilities: { streaming: true, pushNotifications: true },
      skills: [{ id: "greet", name: "greet", description: "Echoes what it is sent" }],
    });
    expect((card.supportedInterfaces as { protocolBinding: string; protocolVersion: string }[]).map((i) => [i.protocolBinding, i.protocolVersion])).toEqual([
      ["JSONRPC", "1.0"],
      ["HTTP+JSON", "1.0"],
    ]);
    const etag = res.headers.get("etag")!;
    const modified = res.headers.get("last-modified")!;
    expect(etag).toBeTruthy();
    expect(modified).toBeTruthy();
    expect(await getStatus(url, { "if-none-match": etag })).toBe(304);
    expect(await getStatus(url, { "if-modified-since": modified })).toBe(304);
    expect(await getStatus(url, { "if-none-match": 'W/"another"' })).toBe(200);
    const client = await clientFor("greet", transport);
    expect((await client.getAgentCard()).name).toBe("greet");
    const extended =
      transport === "JSONRPC"
        ? (
            (await (
              await fetch(`${base}/a2a/t1/greet`, {
                method: "POST",
                headers: { "content-type": "application/json", "a2a-version": "1.0" },
                body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard" }),
              })
            ).json()) as { result: { name: string } }
          ).result
        : ((await (await fetch(`${base}/a2a/t1/greet/extendedAgentCard`, { headers: { "a2a-version": "1.0" } })).json()) as { name: string });
    expect(extended.name).toBe("greet");
  });

  it("A2A-1 a blocking send answers the completed task with the run's result as its artifact", async () => {
    const client = await clientFor("greet", transport);
    const task = asTask(await client.sendMessage(send({ hello: "world" })));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const part = task.artifacts[0]!.parts[0]!;
    expect(part.content).toEqual({ $case: "data", value: { hello: "world" } });
    expect((await world.client.getRun(task.id)).outcome).toBe("found");
  });

  it("A2A-1 a send returning at once, then GetTask polled to completion; text parts become { text }", async () => {
    const client = await clientFor("greet", transport);
    const task = asTask(await client.sendMessage(send(undefined, { text: "hi there", returnImmediately: true })));
    expect([TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]).toContain(task.status?.state);
    const done = await waitFor(
      async () => {
        const t = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
        return t.status?.state === TaskState.TASK_STATE_COMPLETED ? t : undefined;
      },
      { timeoutMs: 20_000, describe: "the task to complete" },
    );
    expect(done.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { text: "hi there" } });
  });

  it("A2A-1 a streaming send: the task first, then its updates; the stream closes at the terminal state", async () => {
    const client = await clientFor("nap", transport);
    const events = await collect(client.sendMessageStream(send({ ms: 300 })));
    expect(events[0]!.payload?.$case).toBe("task");
    const kinds = events.slice(1).map((e) => e.payload?.$case);
    expect(kinds).toContain("artifactUpdate");
    const last = events.at(-1)!.payload;
    expect(last?.$case).toBe("statusUpdate");
    expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("A2A-1 ListTasks pages newest first and filters by context and state", async () => {
    const client = await clientFor("greet", transport);
    const contextId = `ctx-${transport}-${Date.now()}`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const request = send({ i });
      request.message!.contextId = contextId;
      ids.push(asTask(await client.sendMessage(request)).id);
    }
    const seen: string[] = [];
    let token = "";
    for (let pages = 0; pages < 10; pages++) {
      const page = await client.listTasks(ListTasksRequest.fromJSON({ contextId, pageSize: 2, pageToken: token }));
      expect(page.totalSize).toBe(5);
      expect(page.tasks.length).toBeLessThanOrEqual(2);
      seen.push(...page.tasks.map((t) => t.id));
      for (const t of page.tasks) expect(t.contextId).toBe(contextId);
      token = page.nextPageToken;
      if (!token) break;
    }
    expect(seen.sort()).toEqual([...ids].sort());
    const completed = await client.listTasks(ListTasksRequest.fromJSON({ contextId, status: "TASK_STATE_COMPLETED" }));
    expect(completed.tasks).toHaveLength(5);
    const working = await client.listTasks(ListTasksRequest.fromJSON({ contextId, status: "TASK_STATE_WORKING" }));
    expect(working.tasks).toHaveLength(0);
  });

  it("A2A-1 CancelTask cancels the run; a second cancel of the ended task is TaskNotCancelable", async () => {
    const client = await clientFor("nap", transport);
    const task = asTask(await client.sendMessage(send({ ms: 30_000 }, { returnImmediately: true })));
    const cancelled = await client.cancelTask(CancelTaskRequest.fromJSON({ id: task.id }));
    expect([TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_WORKING]).toContain(cancelled.status?.state);
    await waitFor(
      async () => ((await client.getTask(GetTaskRequest.fromJSON({ id: task.id }))).status?.state === TaskState.TASK_STATE_CANCELED ? true : undefined),
      {
        timeoutMs: 15_000,
        describe: "the task to be cancelled",
      },
    );
    expect((await world.client.getRun(task.id)).run).toMatchObject({ status: "cancelled" });
    await expect(client.cancelTask(CancelTaskRequest.fromJSON({ id: task.id }))).rejects.toMatchObject({ name: "TaskNotCancelableError" });
    await expect(client.getTask(GetTaskRequest.fromJSON({ id: "t1_nosuchtask" }))).rejects.toMatchObject({ name: "TaskNotFoundError" });
  });

  it("A2A-1 SubscribeToTask after a reconnect: the task as it is, then the rest until it ends", async () => {
    const client = await clientFor("nap", transport);
    const ac = new AbortController();
    const first = client.sendMessageStream(send({ ms: 1_500 }), { signal: ac.signal });
    const opening = await first.next();
    expect(opening.value?.payload?.$case).toBe("task");
    const id = opening.value!.payload!.$case === "task" ? opening.value!.payload!.value.id : "";
    // The client goes away mid-stream, then comes back.
    ac.abort();
    await first.return(undefined).catch(() => undefined);
    const again = await clientFor("nap", transport);
    const events = await collect(again.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id })));
    expect(events[0]!.payload?.$case).toBe("task");
    const last = events.at(-1)!.payload;
    expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    await expect(collect(again.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id })))).rejects.toMatchObject({ name: "UnsupportedOperationError" });
  });

  it("A2A-3 a resend of the same messageId answers the same task, and one run was made", async () => {
    const client = await clientFor("greet", transport);
    const id = messageId();
    const a = asTask(await client.sendMessage(send({ n: 1 }, { id })));
    const b = asTask(await client.sendMessage(send({ n: 2 }, { id })));
    const c = asTask(await client.sendMessage(send({ n: 3 }, { id, returnImmediately: true })));
    expect(b.id).toBe(a.id);
    expect(c.id).toBe(a.id);
    expect(b.contextId).toBe(a.contextId);
    expect(b.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { n: 1 } });
    const runs = ((await world.client.listRuns({ limit: 500 })).runs as { id: string; input?: unknown }[]).filter((r) => r.id === a.id);
    expect(runs).toHaveLength(1);
  });

  it("A2A-2 input-required: the run waits on its approval; a follow-up message on the task approves it and the task completes", async () => {
    const client = await clientFor("gate", transport);
    const asked = asTask(await client.sendMessage(send({ release: "1.2" })));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(asked.status?.message?.parts[0]!.content).toEqual({ $case: "text", value: "Ship it?" });
    const answer = messageId();
    const done = asTask(await client.sendMessage(send(undefined, { id: answer, taskId: asked.id, text: "yes, ship it" })));
    expect(done.id).toBe(asked.id);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    // A resend of the answer answers the task.
    expect(asTask(await client.sendMessage(send(undefined, { id: answer, taskId: asked.id, text: "yes, ship it" }))).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    expect((await world.client.getRun(asked.id)).run).toMatchObject({ status: "succeeded" });
    // A task that ended takes no more messages.
    await expect(client.sendMessage(send(undefined, { taskId: asked.id, text: "again" }))).rejects.toMatchObject({ name: "UnsupportedOperationError" });
  });

  it("A2A-2 a run waiting for a signal requires input; the follow-up's input is the signal's data", async () => {
    const client = await clientFor("hold", transport);
    const asked = asTask(await client.sendMessage(send({ order: 7 })));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const done = asTask(await client.sendMessage(send({ value: 42 }, { taskId: asked.id })));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { value: 42 } });
  });

  it("A2A-2 streamed: the stream closes when the task asks for input; the follow-up streams the task to its end", async () => {
    const client = await clientFor("gate", transport);
    const asked = await collect(client.sendMessageStream(send({ release: "2.0" })));
    const last = asked.at(-1)!.payload!;
    const state = last.$case === "task" ? last.value.status?.state : last.$case === "statusUpdate" ? last.value.status?.state : undefined;
    expect(state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const id = asked[0]!.payload!.$case === "task" ? asked[0]!.payload!.value.id : "";
    const rest = await collect(client.sendMessageStream(send({ decision: "approve" }, { taskId: id })));
    expect(rest[0]!.payload?.$case).toBe("task");
    const end = rest.at(-1)!.payload!;
    expect(end.$case === "statusUpdate" ? end.value.status?.state : end.$case === "task" ? end.value.status?.state : undefined).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
  });

  it("A2A-2 a follow-up that rejects ends the task failed", async () => {
    const client = await clientFor("gate", transport);
    const asked = asTask(await client.sendMessage(send({ release: "1.3" })));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const done = asTask(await client.sendMessage(send({ decision: "reject", reason: "not today" }, { taskId: asked.id })));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_FAILED);
  });
});
