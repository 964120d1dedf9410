// Per-tenant API keys as the A2A server's callers (issue 39 §3, the HTTP half): a real node serving
// HTTP, keys made and revoked over the NATS API, requests by the official A2A client with a bearer
// token (its fetch adds the header) and by plain fetch for the refusals.
import { createHash } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { SendMessageRequest, TaskState, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, type Client } from "@a2a-js/sdk/client";
import { startRunwayNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { fileURLToPath } from "node:url";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { HANDLERS, workflowWorld } from "./workflow-support.js";

const world = workflowWorld({ name: "a2a-keys-node", http: { port: 0 } });
let base = "";

const GREET = { name: "greet", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }], result: "${steps.e.output}" };
const GATE = {
  name: "gate",
  nodes: [
    { id: "gate", kind: "approval", prompt: "Ship it?", payload: "${input}", group: "ops", timeout_ms: 3_600_000 },
    { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
  ],
  result: "${steps.after.output}",
};

beforeAll(async () => {
  base = world.node.httpUrl!;
  for (const [tenant, defs] of [
    ["t1", [GREET, GATE]],
    ["t2", [GREET]],
  ] as const) {
    const api = world.clientFor(tenant);
    for (const def of defs) {
      expect((await api.putDefinition(def)).outcome).toMatch(/published|unchanged/);
      expect((await api.exposeAgent({ definition: def.name })).outcome).toBe("exposed");
    }
  }
}, 30_000);

let sequence = 0;
const messageId = () => `k-${process.pid}-${Date.now()}-${sequence++}`;

function send(data: unknown, options: { taskId?: string; returnImmediately?: boolean } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId: messageId(), role: "ROLE_USER", ...(options.taskId ? { taskId: options.taskId } : {}), parts: [{ data }] },
    configuration: { returnImmediately: options.returnImmediately ?? false },
  });
}

/** The official client, every request of it carrying `Authorization: Bearer <token>`. */
async function clientWith(token: string, tenant: string, agent: string, transport: "JSONRPC" | "HTTP+JSON" = "JSONRPC"): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("Authorization", `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
      preferredTransports: [transport],
    }),
  );
  return factory.createFromUrl(`${base}/a2a/${tenant}/${agent}/`);
}

async function createKey(
  tenant: string,
  name: string,
  extra: { groups?: string[]; interactive?: boolean } = {},
): Promise<{ token: string; key: Record<string, unknown> }> {
  const created = await world.clientFor(tenant).createKey({ name, ...extra });
  expect(created.outcome).toBe("created");
  return { token: created.token as string, key: created.key as Record<string, unknown> };
}

/** A REST GET of the agent's tasks with this Authorization header (none when undefined). */
async function listTasks(tenant: string, agent: string, authorization?: string, at = base): Promise<Response> {
  return fetch(`${at}/a2a/${tenant}/${agent}/tasks`, { headers: { "A2A-Version": "1.0", ...(authorization ? { Authorization: authorization } : {}) } });
}

function asTask(result: unknown): Task {
  expect(result).toHaveProperty("status");
  return result as Task;
}

describe("API keys", () => {
  it("keys create: its token works on a non-public agent (both bindings); keys list shows id, name, groups, revoked and the last 4 characters, never the token", async () => {
    const { token, key } = await createKey("t1", "caller", { groups: ["ops"] });
    expect(token).toMatch(/^rwk\.t1\.caller\./);
    expect(key).toMatchObject({ name: "caller", identity: "key:t1/caller", groups: ["ops"], revoked: false, interactive: false });
    for (const transport of ["JSONRPC", "HTTP+JSON"] as const) {
      const client = await clientWith(token, "t1", "greet", transport);
      const task = asTask(await client.sendMessage(send({ hello: transport })));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    }
    const listed = await world.client.listKeys();
    expect(listed.outcome).toBe("ok");
    const mine = (listed.keys as Record<string, unknown>[]).find((k) => k.name === "caller")!;
    expect(Object.keys(mine).sort()).toEqual(["created_at", "groups", "id", "identity", "interactive", "last4", "name", "revoked"]);
    expect(String(mine.last4).length).toBeLessThanOrEqual(4);
    expect(token.endsWith(String(mine.last4))).toBe(true);
    expect(JSON.stringify(listed)).not.toContain(token);
    expect((await world.client.createKey({ name: "caller" })).outcome).toBe("key_exists");
    expect((await world.client.revokeKey("nobody")).outcome).toBe("key_not_found");
  });

  it("runway keys create prints the token once; keys ls shows the key without it; keys revoke refuses it (exit 1 for an unknown key)", async () => {
    const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
    const runway = async (args: string[]) => {
      const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"], {
        name: `runway ${args.join(" ")}`,
      });
      const exit = await child.exited;
      return { code: exit.code, out: child.lines.join("\n") };
    };
    const created = await runway(["keys", "create", "from-cli", "--group", "ops", "--group", "finance", "--interactive"]);
    expect(created.code).toBe(0);
    const answer = JSON.parse(created.out) as { token: string; key: Record<string, unknown> };
    expect(answer.key).toMatchObject({ name: "from-cli", groups: ["finance", "ops"], interactive: true, revoked: false });
    expect((await listTasks("t1", "greet", `Bearer ${answer.token}`)).status).toBe(200);
    const listed = await runway(["keys", "ls"]);
    expect(listed.code).toBe(0);
    expect(listed.out).toContain("from-cli");
    expect(listed.out).not.toContain(answer.token);
    expect((await runway(["keys", "revoke", "from-cli"])).code).toBe(0);
    expect((await listTasks("t1", "greet", `Bearer ${answer.token}`)).status).toBe(401);
    const unknown = await runway(["keys", "revoke", "no-such-key"]);
    expect(unknown.code).toBe(1);
    expect(unknown.out).toMatch(/key_not_found/);
  }, 60_000);

  it("no token, a malformed one, a wrong secret: 401 with WWW-Authenticate, in the binding's shape", async () => {
    const { token } = await createKey("t1", "shape");
    for (const auth of [undefined, "Bearer nonsense", `Bearer ${token.slice(0, -4)}AAAA`, `Basic ${Buffer.from("a:b").toString("base64")}`]) {
      const res = await listTasks("t1", "greet", auth);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(((await res.json()) as { error: { status: string } }).error.status).toBe("UNAUTHENTICATED");
    }
    const rpc = await fetch(`${base}/a2a/t1/greet`, {
      method: "POST",
      headers: { "content-type": "application/json", "A2A-Version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }),
    });
    expect(rpc.status).toBe(401);
    expect(((await rpc.json()) as { error: { code: number } }).error.code).toBe(-32600);
    expect((await listTasks("t1", "greet", `Bearer ${token}`)).status).toBe(200);
  });

  it("keys revoke: the token is refused at once (401), the key stays listed as revoked; its name can be taken again with a new token", async () => {
    const { token } = await createKey("t1", "short-lived");
    expect((await listTasks("t1", "greet", `Bearer ${token}`)).status).toBe(200);
    const revoked = await world.client.revokeKey("short-lived");
    expect(revoked).toMatchObject({ outcome: "revoked", key: { name: "short-lived", revoked: true } });
    // No wait: the node that wrote the revocation holds it already.
    expect((await listTasks("t1", "greet", `Bearer ${token}`)).status).toBe(401);
    const listed = (await world.client.listKeys()).keys as { name: string; revoked: boolean }[];
    expect(listed.find((k) => k.name === "short-lived")?.revoked).toBe(true);
    const again = await createKey("t1", "short-lived");
    expect(again.token).not.toBe(token);
    expect((await listTasks("t1", "greet", `Bearer ${again.token}`)).status).toBe(200);
    expect((await listTasks("t1", "greet", `Bearer ${token}`)).status).toBe(401);
  });

  it("a revocation written through one node holds on another node serving HTTP as soon as its watched copy sees it", async () => {
    const other = await startRunwayNode({
      connection: world.server.connectOptions(),
      name: "a2a-keys-node-2",
      handlers: [HANDLERS],
      logger: createLogger("a2a-keys-node-2", "error"),
      http: { port: 0 },
      api: false,
    });
    try {
      const { token } = await createKey("t1", "two-nodes");
      const there = other.httpUrl!;
      await waitFor(async () => (await listTasks("t1", "greet", `Bearer ${token}`, there)).status === 200 || undefined, {
        timeoutMs: 10_000,
        describe: "the other node to admit the new key",
      });
      const revokedAt = Date.now();
      expect((await world.client.revokeKey("two-nodes")).outcome).toBe("revoked");
      await waitFor(async () => (await listTasks("t1", "greet", `Bearer ${token}`, there)).status === 401 || undefined, {
        timeoutMs: 2_000,
        describe: "the other node to refuse the revoked key",
      });
      expect(Date.now() - revokedAt).toBeLessThan(2_000);
    } finally {
      await other.stop();
    }
  }, 60_000);

  it("a key of tenant t2 on an agent of t1 is refused (403), and sees none of its tasks", async () => {
    const { token: t1Token } = await createKey("t1", "owner");
    const task = asTask(await (await clientWith(t1Token, "t1", "greet")).sendMessage(send({ mine: true })));
    const { token } = await createKey("t2", "stranger");
    const res = await fetch(`${base}/a2a/t1/greet/tasks/${task.id}`, { headers: { "A2A-Version": "1.0", Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(403);
    expect(await res.text()).not.toContain("mine");
    await expect((await clientWith(token, "t1", "greet")).sendMessage(send({ x: 1 }))).rejects.toThrow();
    // Its own tenant's agent answers it.
    expect(asTask(await (await clientWith(token, "t2", "greet")).sendMessage(send({ x: 1 }))).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("stored hashed: neither the token nor its secret is in the keys bucket, only the SHA-256 of the token", async () => {
    const { token } = await createKey("t1", "at-rest");
    const kv = await new Kvm(world.nc).open("rw_api_keys");
    const values: string[] = [];
    for await (const k of await kv.keys()) {
      const e = await kv.get(k);
      if (e) values.push(e.string());
    }
    const all = values.join("\n");
    expect(all).not.toContain(token);
    expect(all).not.toContain(token.split(".")[3]!);
    expect(all).toContain(createHash("sha256").update(token).digest("hex"));
  });
});

describe("identity reaches decisions", () => {
  it("the key that sends the first message is the run's initiator", async () => {
    const { token } = await createKey("t1", "starter");
    const task = asTask(await (await clientWith(token, "t1", "greet")).sendMessage(send({ who: "starter" })));
    const run = (await world.client.getRun(task.id)).run as { initiator?: string; source: string };
    expect(run.initiator).toBe("key:t1/starter");
  });

  it("a start its tenant refuses leaves an audit record naming the key that asked", async () => {
    const tenant = "audited";
    const api = world.clientFor(tenant);
    await api.createTenant(tenant);
    expect((await api.putDefinition(GREET)).outcome).toMatch(/published|unchanged/);
    expect((await api.exposeAgent({ definition: "greet" })).outcome).toBe("exposed");
    expect((await api.setTenantState(tenant, "kill", "test")).outcome).toBe("killed");
    const { token } = await createKey(tenant, "refused-caller");
    const task = asTask(await (await clientWith(token, tenant, "greet")).sendMessage(send({ x: 1 })));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    const jsm = await jetstreamManager(world.nc);
    const last = await jsm.streams.getMessage("RUNWAY_AUDIT", { last_by_subj: `rw.audit.${tenant}.admission` });
    expect(last?.json()).toMatchObject({ type: "start_refused", code: "tenant_killed", source: "a2a", initiator: `key:${tenant}/refused-caller` });
  });

  it("an approval decided over A2A by a key outside its reviewer group answers not_authorized; its initiator cannot approve it; a reviewer of the group can", async () => {
    const { token: initiator } = await createKey("t1", "ops-starter", { groups: ["ops"] });
    const { token: outsider } = await createKey("t1", "outsider", { groups: ["finance"] });
    const { token: reviewer } = await createKey("t1", "ops-reviewer", { groups: ["ops"] });
    const asked = asTask(await (await clientWith(initiator, "t1", "gate")).sendMessage(send({ ship: 1 })));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    for (const [token, why] of [
      [outsider, /not_authorized: key:t1\/outsider is not in the approval's reviewer group ops/],
      [initiator, /not_authorized: key:t1\/ops-starter started this run/],
    ] as const) {
      await expect((await clientWith(token, "t1", "gate")).sendMessage(send({ decision: "approve" }, { taskId: asked.id }))).rejects.toThrow(why);
    }
    const still = (await world.client.getRun(asked.id)).run as { status: string };
    expect(still.status).toBe("waiting");
    const done = asTask(await (await clientWith(reviewer, "t1", "gate")).sendMessage(send({ decision: "approve" }, { taskId: asked.id })));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const run = await world.settled(asked.id);
    expect(run.result).toMatchObject({ decision: "approved", by: "key:t1/ops-reviewer" });
  });

  it("the A2A caller's lane is its key's: batch for a key without interactive even where the tenant lets source a2a in, interactive for one with it", async () => {
    const tenant = "lanes";
    const api = world.clientFor(tenant);
    await api.createTenant(tenant);
    expect((await api.putTenant({ interactive_sources: ["a2a", "cli"] })).outcome).toBe("updated");
    expect((await api.putDefinition(GREET)).outcome).toMatch(/published|unchanged/);
    expect((await api.exposeAgent({ definition: "greet" })).outcome).toBe("exposed");
    const { token: batch } = await createKey(tenant, "batch-service");
    const { token: person } = await createKey(tenant, "console", { interactive: true });
    const lane = async (token: string) => {
      const task = asTask(await (await clientWith(token, tenant, "greet")).sendMessage(send({ x: 1 })));
      return waitFor(async () => ((await api.getRun(task.id)).run as { lane?: string } | undefined)?.lane, { timeoutMs: 10_000, describe: "the run" });
    };
    expect(await lane(batch)).toBe("batch");
    expect(await lane(person)).toBe("interactive");
  });
});
