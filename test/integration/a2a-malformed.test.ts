import { expect, it } from "vitest";
import { workflowWorld } from "./workflow-support.js";

const world = workflowWorld({ name: "a2a-malformed", http: { port: 0 } });

type Case = { name: string; agent?: string; path?: string; method?: string; type?: string | null; version?: string | null; body?: string };

const rpc = (method: string, params: unknown, id: unknown = 1) => JSON.stringify({ jsonrpc: "2.0", id, method, params });
const message = (parts: unknown[], extra: Record<string, unknown> = {}) => ({ message: { messageId: "m-bad", role: "ROLE_USER", parts, ...extra } });
const deep = (n: number): string => "[".repeat(n) + "]".repeat(n);

/** JSON-RPC requests, POSTed to the agent's URL: each answers an error envelope. */
const RPC: Case[] = [
  { name: "not JSON", body: "{not json" },
  { name: "not UTF-8", body: "\uFFFD\u0000" },
  { name: "wrong version", body: JSON.stringify({ jsonrpc: "1.0", id: 1, method: "SendMessage", params: {} }) },
  { name: "no method", body: JSON.stringify({ jsonrpc: "2.0", id: 1 }) },
  { name: "an id that is an object", body: JSON.stringify({ jsonrpc: "2.0", id: { a: 1 }, method: "GetTask", params: { id: "x" } }) },
  { name: "unknown method", body: rpc("Teleport", {}) },
  { name: "a 0.3 method name", body: rpc("message/send", message([{ text: "hi" }])) },
  { name: "params as an array", body: rpc("GetTask", ["x"]) },
  { name: "oversized body", body: rpc("SendMessage", message([{ text: "x".repeat(300 * 1024) }])) },
  { name: "deep nesting", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":${deep(200)}}` },
  { name: "no message", body: rpc("SendMessage", {}) },
  { name: "no messageId", body: rpc("SendMessage", { message: { role: "ROLE_USER", parts: [{ text: "hi" }] } }) },
  { name: "no parts", body: rpc("SendMessage", message([])) },
  { name: "raw bytes part", body: rpc("SendMessage", message([{ raw: "AAAA", mediaType: "application/octet-stream" }])) },
  { name: "url part", body: rpc("SendMessage", message([{ url: "http://example.com/file.pdf" }])) },
  { name: "image media type", body: rpc("SendMessage", message([{ text: "x", mediaType: "image/png" }])) },
  { name: "empty part", body: rpc("SendMessage", message([{}])) },
  { name: "output modes it cannot give", body: rpc("SendMessage", { ...message([{ text: "hi" }]), configuration: { acceptedOutputModes: ["image/png"] } }) },
  { name: "messageId too long", body: rpc("SendMessage", { message: { messageId: "m".repeat(300), role: "ROLE_USER", parts: [{ text: "hi" }] } }) },
  { name: "follow-up to an unknown task", body: rpc("SendMessage", message([{ text: "yes" }], { taskId: "t1_nosuchtask" })) },
  { name: "unknown task", body: rpc("GetTask", { id: "t1_nosuchtask" }) },
  { name: "task id of another tenant", body: rpc("GetTask", { id: "t2_0123456789abcdef" }) },
  { name: "cancel an unknown task", body: rpc("CancelTask", { id: "t1_nosuchtask" }) },
  { name: "subscribe to an unknown task", body: rpc("SubscribeToTask", { id: "t1_nosuchtask" }) },
  { name: "bad page size", body: rpc("ListTasks", { pageSize: 1000 }) },
  { name: "bad page token", body: rpc("ListTasks", { pageToken: "!!!" }) },
  { name: "push config for an unknown task", body: rpc("CreateTaskPushNotificationConfig", { taskId: "t1_x", url: "https://example.com/hook" }) },
  {
    name: "push config to plain http off this machine",
    body: rpc("SendMessage", { ...message([{ text: "hi" }]), configuration: { taskPushNotificationConfig: { url: "http://example.com/hook" } } }),
  },
  { name: "wrong media type", type: "text/plain", body: rpc("GetTask", { id: "x" }) },
  { name: "a2a media type on JSON-RPC", type: "application/a2a+json", body: rpc("GetTask", { id: "x" }) },
  { name: "no A2A-Version (0.3)", version: null, body: rpc("GetTask", { id: "x" }) },
  { name: "unsupported version", version: "9.9", body: rpc("GetTask", { id: "x" }) },
  { name: "unknown agent", path: "/a2a/t1/nobody", body: rpc("GetTask", { id: "x" }) },
  { name: "unknown tenant", path: "/a2a/nobody/echo", body: rpc("GetTask", { id: "x" }) },
  { name: "no credentials for a non-public agent", path: "/a2a/t1/secret", body: rpc("SendMessage", message([{ text: "hi" }])) },
];

/** HTTP+JSON requests under the agent's URL: each answers a 4xx `google.rpc.Status`. */
const REST: Case[] = [
  { name: "not JSON", path: "/message:send", method: "POST", body: "{not json" },
  { name: "wrong media type", path: "/message:send", method: "POST", type: "text/plain", body: "hello" },
  { name: "no message", path: "/message:send", method: "POST", body: "{}" },
  { name: "bad parts", path: "/message:send", method: "POST", body: JSON.stringify(message([{ raw: "AAAA" }])) },
  { name: "oversized", path: "/message:send", method: "POST", body: JSON.stringify(message([{ text: "x".repeat(300 * 1024) }])) },
  { name: "streaming bad parts", path: "/message:stream", method: "POST", body: JSON.stringify(message([])) },
  { name: "unknown task", path: "/tasks/t1_nosuchtask", method: "GET" },
  { name: "cancel unknown task", path: "/tasks/t1_nosuchtask:cancel", method: "POST", body: "{}" },
  { name: "subscribe unknown task", path: "/tasks/t1_nosuchtask:subscribe", method: "POST", body: "{}" },
  { name: "bad page size", path: "/tasks?pageSize=1000", method: "GET" },
  { name: "bad history length", path: "/tasks/x?historyLength=-4", method: "GET" },
  { name: "unknown path", path: "/teleport", method: "GET" },
  { name: "unknown method on a path", path: "/message:send", method: "DELETE" },
  {
    name: "push configs of an unknown task",
    path: "/tasks/t1_x/pushNotificationConfigs",
    method: "POST",
    body: JSON.stringify({ url: "https://example.com/hook" }),
  },
  { name: "no A2A-Version", path: "/tasks/x", method: "GET", version: null },
  { name: "no credentials for a non-public agent", agent: "secret", path: "/message:send", method: "POST", body: JSON.stringify(message([{ text: "hi" }])) },
];

async function send(base: string, c: Case, rest: boolean): Promise<{ status: number; text: string; type: string }> {
  const headers: Record<string, string> = {};
  const type = c.type === undefined ? "application/json" : c.type;
  if (type !== null && c.body !== undefined) headers["content-type"] = type;
  const version = c.version === undefined ? "1.0" : c.version;
  if (version !== null) headers["a2a-version"] = version;
  const url = rest ? `${base}/a2a/t1/${c.agent ?? "echo"}${c.path ?? ""}` : `${base}${c.path ?? "/a2a/t1/echo"}`;
  const res = await fetch(url, { method: rest ? (c.method ?? "GET") : "POST", headers, ...(c.body !== undefined ? { body: c.body } : {}) });
  return { status: res.status, text: await res.text(), type: res.headers.get("content-type") ?? "" };
}

it("A2A-9 1,000 malformed A2A requests get spec-shaped errors, the node keeps serving, and no run is created", async () => {
  expect((await world.client.putDefinition({ name: "echo", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }] })).outcome).toMatch(
    /published|unchanged/,
  );
  expect((await world.client.exposeAgent({ definition: "echo", public: true })).outcome).toBe("exposed");
  expect((await world.client.exposeAgent({ definition: "echo", name: "secret" })).outcome).toBe("exposed");
  const base = world.node.httpUrl!;
  const runsBefore = ((await world.client.listRuns({ limit: 500 })).runs as unknown[]).length;
  const cases = [...RPC.map((c) => ({ c, rest: false })), ...REST.map((c) => ({ c, rest: true }))];
  const codes = new Map<string, number>();
  let next = 0;
  let answered = 0;
  const total = 1_000;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < total) {
        const { c, rest } = cases[next++ % cases.length]!;
        const what = `${rest ? "REST" : "JSON-RPC"} ${c.name}`;
        const res = await send(base, c, rest);
        expect(res.text, what).not.toMatch(/\bat .+\.(js|ts):\d+/);
        expect(res.type, what).toMatch(/json/);
        const body = JSON.parse(res.text) as { jsonrpc?: string; error?: { code?: unknown; status?: unknown; message?: unknown } };
        if (rest) {
          expect(res.status, what).toBeGreaterThanOrEqual(400);
          expect(res.status, what).toBeLessThan(500);
          expect(body.error, what).toMatchObject({ code: res.status, status: expect.any(String), message: expect.any(String) });
          codes.set(`rest ${res.status} ${String(body.error!.status)}`, (codes.get(`rest ${res.status} ${String(body.error!.status)}`) ?? 0) + 1);
        } else {
          expect(body.jsonrpc, what).toBe("2.0");
          expect(body.error?.code, what).toEqual(expect.any(Number));
          expect(body.error?.message, what).toEqual(expect.any(String));
          codes.set(`rpc ${String(body.error!.code)}`, (codes.get(`rpc ${String(body.error!.code)}`) ?? 0) + 1);
        }
        answered++;
      }
    }),
  );
  expect(answered).toBe(total);
  for (const code of [-32700, -32600, -32601, -32602, -32001, -32005, -32009]) expect(codes.get(`rpc ${code}`), `rpc ${code}`).toBeGreaterThan(0);
  for (const status of [400, 404, 413])
    expect(
      [...codes.keys()].some((k) => k.startsWith(`rest ${status}`)),
      `rest ${status}`,
    ).toBe(true);
  expect(((await world.client.listRuns({ limit: 500 })).runs as unknown[]).length).toBe(runsBefore);
  // Still serving: a good request is answered.
  const good = await fetch(`${base}/a2a/t1/echo`, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: rpc("SendMessage", { message: { messageId: "m-good", role: "ROLE_USER", parts: [{ data: { ok: true } }] } }),
  });
  const answer = (await good.json()) as { result?: { task?: { status?: { state?: string } } } };
  expect(answer.result?.task?.status?.state).toBe("TASK_STATE_COMPLETED");
}, 120_000);

it("A2A-9 SendMessage and GetTask answer the same by the hot route (server.ts serveHot) as by the SDK's JSON-RPC router, byte for byte", async () => {
  expect((await world.client.putDefinition({ name: "echo", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }] })).outcome).toMatch(
    /published|unchanged/,
  );
  await world.client.exposeAgent({ definition: "echo", public: true });
  const base = world.node.httpUrl!;
  const post = async (body: string, headers: Record<string, string>) => {
    const res = await fetch(`${base}/a2a/t1/echo`, { method: "POST", headers: { "a2a-version": "1.0", ...headers }, body });
    const answered = Object.fromEntries([...res.headers].filter(([name]) => name !== "date"));
    return { status: res.status, headers: answered, text: await res.text() };
  };
  const first = JSON.parse(
    (await post(rpc("SendMessage", message([{ data: { n: 1 } }], { messageId: "m-same" })), { "content-type": "application/json" })).text,
  ) as {
    result: { task: { id: string } };
  };
  const hotAndSdk = [
    ...RPC.filter((c) => c.body?.includes('"method":"SendMessage"') || c.body?.includes('"method":"GetTask"')).map((c) => c.body!),
    rpc("GetTask", { id: first.result.task.id }),
    rpc("GetTask", { id: first.result.task.id }, "a string id"),
    rpc("GetTask", { id: first.result.task.id }, null),
    rpc("SendMessage", message([{ data: { n: 2 } }], { messageId: "m-same" })),
    rpc("SendMessage", { ...message([{ text: "again" }], { messageId: "m-same" }), configuration: { returnImmediately: true } }, 7),
    rpc("GetTask", { id: first.result.task.id, tenant: "t1" }),
    rpc("GetTask", {}),
    JSON.stringify({ jsonrpc: "2.0", id: 1.5, method: "GetTask", params: { id: "x" } }),
    JSON.stringify({ jsonrpc: "2.0", method: "GetTask", params: { id: first.result.task.id } }),
  ];
  for (const body of hotAndSdk) {
    for (const type of ["application/json", "application/json; charset=utf-8"]) {
      const hot = await post(body, { "content-type": type });
      // An extension header (none is served, so it changes nothing) sends the request through the SDK's router.
      const sdk = await post(body, { "content-type": type, "a2a-extensions": "urn:example:none" });
      expect(hot, body.slice(0, 120)).toEqual(sdk);
    }
  }
}, 60_000);
