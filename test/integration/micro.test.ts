import { connect, headers, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MicroService, SERVICE_ERROR_CODE_HEADER, SERVICE_ERROR_HEADER } from "../../runtime/micro/index.js";
import { natsCli, startServer, waitFor, type NatsServerHandle } from "../harness/index.js";

const NAME = "runway_micro_test";
let server: NatsServerHandle;
let nc: NatsConnection;
let client: NatsConnection;
let svc: MicroService;
const connections: NatsConnection[] = [];
const dec = new TextDecoder();

interface EndpointStats {
  name: string;
  subject: string;
  queue_group: string;
  num_requests: number;
  num_errors: number;
  last_error: string;
  processing_time: number;
  average_processing_time: number;
}

function addEndpoints(service: MicroService, instance: string): void {
  service.addEndpoint("echo", {
    subject: "runway.v1.*.echo",
    metadata: { schema: "echo.v1" },
    handler: (req) => {
      const out = headers();
      out.set("Rw-Instance", instance);
      const body = { instance, subject: req.subject, body: dec.decode(req.data), header: req.headers?.get("Rw-Test") || null };
      req.respond(JSON.stringify(body), out);
    },
  });
  service.addEndpoint("conflict", {
    subject: "runway.v1.conflict",
    handler: (req) => req.respondError(409, "already started", '{"state":"running"}'),
  });
  service.addEndpoint("boom", {
    subject: "runway.v1.boom",
    handler: (req) => {
      if (dec.decode(req.data) === "sync") throw new Error("sync kaboom");
      return Promise.reject(new Error("async kaboom"));
    },
  });
  service.addEndpoint("slow", {
    subject: "runway.v1.slow",
    queue: "slowpokes",
    handler: async (req) => {
      await new Promise((r) => setTimeout(r, 25));
      req.respond("late");
    },
  });
}

async function srv<T>(subject: string): Promise<T> {
  return (await client.request(subject, "", { timeout: 2_000 })).json<T>();
}

async function statsOf(endpoint: string, id = svc.id): Promise<EndpointStats> {
  const stats = await srv<{ endpoints: EndpointStats[] }>(`$SRV.STATS.${NAME}.${id}`);
  const ep = stats.endpoints.find((e) => e.name === endpoint);
  if (!ep) throw new Error(`no stats for ${endpoint}`);
  return ep;
}

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
  client = await connect(server.connectOptions());
  connections.push(nc, client);
  svc = new MicroService(nc, { name: NAME, version: "1.2.3", description: "micro test service", metadata: { role: "test" } });
  addEndpoints(svc, "a");
  await svc.start();
});

afterAll(async () => {
  await svc?.stop();
  for (const c of connections) await c.close().catch(() => undefined);
  await server?.dispose();
});

describe("MicroService", () => {
  it("rejects invalid names and versions", () => {
    expect(() => new MicroService(nc, { name: "bad name", version: "1.0.0" })).toThrow(/invalid service name/);
    expect(() => new MicroService(nc, { name: "ok", version: "1.0" })).toThrow(/SemVer/);
  });

  it("answers $SRV.PING / INFO / STATS with the ADR-32 shapes", async () => {
    const common = { name: NAME, id: svc.id, version: "1.2.3", metadata: { role: "test" } };
    for (const subject of ["$SRV.PING", `$SRV.PING.${NAME}`, `$SRV.PING.${NAME}.${svc.id}`]) {
      expect(await srv(subject)).toEqual({ type: "io.nats.micro.v1.ping_response", ...common });
    }
    expect(await srv(`$SRV.INFO.${NAME}`)).toEqual({
      type: "io.nats.micro.v1.info_response",
      ...common,
      description: "micro test service",
      endpoints: [
        { name: "echo", subject: "runway.v1.*.echo", queue_group: "q", metadata: { schema: "echo.v1" } },
        { name: "conflict", subject: "runway.v1.conflict", queue_group: "q", metadata: {} },
        { name: "boom", subject: "runway.v1.boom", queue_group: "q", metadata: {} },
        { name: "slow", subject: "runway.v1.slow", queue_group: "slowpokes", metadata: {} },
      ],
    });
    const stats = await srv<Record<string, unknown>>(`$SRV.STATS.${NAME}.${svc.id}`);
    expect(stats).toMatchObject({ type: "io.nats.micro.v1.stats_response", ...common });
    expect(new Date(stats.started as string).toISOString()).toBe(stats.started);
    expect((stats.endpoints as EndpointStats[])[0]).toEqual({
      name: "echo",
      subject: "runway.v1.*.echo",
      queue_group: "q",
      num_requests: expect.any(Number),
      num_errors: expect.any(Number),
      last_error: expect.any(String),
      processing_time: expect.any(Number),
      average_processing_time: expect.any(Number),
    });
  });

  it("nats micro ls / info / ping see the service", async () => {
    const ls = await natsCli(server, ["micro", "ls"]);
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toContain(NAME);
    expect(ls.stdout).toContain("1.2.3");
    expect(ls.stdout).toContain(svc.id);

    const info = await natsCli(server, ["micro", "info", NAME]);
    expect(info.code, info.stderr).toBe(0);
    for (const text of ["echo", "runway.v1.*.echo", "conflict", "runway.v1.conflict", "runway.v1.slow", "slowpokes", "schema: echo.v1"]) {
      expect(info.stdout).toContain(text);
    }

    const ping = await natsCli(server, ["micro", "ping", NAME, "--timeout=1s"]); // ping waits out the timeout
    expect(ping.code, ping.stderr).toBe(0);
    expect(ping.stdout).toContain(`${NAME} ${svc.id}`);
  });

  it("answers nats req on a wildcard endpoint subject", async () => {
    const r = await natsCli(server, ["req", "runway.v1.tenant-7.echo", "hello"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split("\n")[0]!)).toEqual({ instance: "a", subject: "runway.v1.tenant-7.echo", body: "hello", header: null });
  });

  it("respondError sets the Nats-Service-Error headers and counts an error", async () => {
    const before = await statsOf("conflict");
    const msg: Msg = await client.request("runway.v1.conflict", "x", { timeout: 2_000 });
    expect(msg.headers?.get(SERVICE_ERROR_HEADER)).toBe("already started");
    expect(msg.headers?.get(SERVICE_ERROR_CODE_HEADER)).toBe("409");
    expect(msg.string()).toBe('{"state":"running"}');
    const after = await statsOf("conflict");
    expect(after).toMatchObject({ num_requests: before.num_requests + 1, num_errors: before.num_errors + 1, last_error: "409:already started" });

    const cli = await natsCli(server, ["req", "runway.v1.conflict", "x"]);
    expect(cli.stdout + cli.stderr).toContain("Nats-Service-Error-Code: 409");
  });

  it("a throwing handler is answered with 500, counted, and the service keeps answering", async () => {
    for (const body of ["sync", "async"]) {
      const msg = await client.request("runway.v1.boom", body, { timeout: 2_000 });
      expect(msg.headers?.get(SERVICE_ERROR_CODE_HEADER)).toBe("500");
      expect(msg.headers?.get(SERVICE_ERROR_HEADER)).toBe(`${body} kaboom`);
    }
    expect(await statsOf("boom")).toMatchObject({ num_requests: 2, num_errors: 2, last_error: "500:async kaboom" });
    const ok = await client.request("runway.v1.x.echo", "still here", { timeout: 2_000 });
    expect(ok.json()).toMatchObject({ body: "still here" });
  });

  it("a reply too large for the server is answered with a 500 saying so, not left to time out", async () => {
    const big = new MicroService(nc, { name: "huge", version: "1.0.0" });
    // Past the server's max payload (1 MiB by default).
    big.addEndpoint("huge", { subject: "runway.v1.huge", handler: (req) => req.respond(new Uint8Array(2 * 1024 * 1024)) });
    await big.start();
    try {
      const msg = await client.request("runway.v1.huge", "", { timeout: 2_000 });
      expect(msg.headers?.get(SERVICE_ERROR_CODE_HEADER)).toBe("500");
      expect(msg.headers?.get(SERVICE_ERROR_HEADER)).toMatch(/^reply not sent/);
    } finally {
      await big.stop();
    }
  });

  it("measures async handler time in nanoseconds", async () => {
    for (let i = 0; i < 3; i++) expect((await client.request("runway.v1.slow", "", { timeout: 2_000 })).string()).toBe("late");
    const slow = await statsOf("slow");
    expect(slow.num_requests).toBe(3);
    expect(slow.processing_time).toBeGreaterThanOrEqual(3 * 24e6);
    expect(slow.average_processing_time).toBeGreaterThanOrEqual(24e6);
    expect(slow.average_processing_time).toBeLessThan(1e9);
  });

  it("nats micro stats shows requests and errors", async () => {
    const r = await natsCli(server, ["micro", "stats", NAME, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const [stats] = JSON.parse(r.stdout) as { id: string; endpoints: EndpointStats[] }[];
    expect(stats?.id).toBe(svc.id);
    expect(stats?.endpoints.find((e) => e.name === "boom")).toMatchObject({ num_requests: 2, num_errors: 2 });
    expect(stats?.endpoints.find((e) => e.name === "conflict")?.num_errors).toBeGreaterThanOrEqual(1);
    const table = await natsCli(server, ["micro", "stats", NAME]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/boom\s+│\s+2\s+│\s+q\s+│\s+2/);
  });

  it("ignores a message without a reply subject", async () => {
    const before = await statsOf("echo");
    client.publish("runway.v1.t.echo", "fire and forget");
    await client.flush();
    const after = await statsOf("echo");
    expect(after.num_requests).toBe(before.num_requests);
    expect((await client.request("runway.v1.t.echo", "ok", { timeout: 2_000 })).json()).toMatchObject({ body: "ok" });
  });

  it("two instances share the requests of a queue group; both answer $SRV", async () => {
    const nc2 = await connect(server.connectOptions());
    connections.push(nc2);
    const svc2 = new MicroService(nc2, { name: NAME, version: "1.2.3" });
    addEndpoints(svc2, "b");
    await svc2.start();
    try {
      const seen = { a: 0, b: 0 };
      for (let i = 0; i < 60; i++) {
        const reply = (await client.request(`runway.v1.t${i}.echo`, String(i), { timeout: 2_000 })).json<{ instance: "a" | "b" }>();
        seen[reply.instance]++;
      }
      expect(seen.a + seen.b).toBe(60);
      expect(seen.a).toBeGreaterThan(0);
      expect(seen.b).toBeGreaterThan(0);
      expect((await statsOf("echo", svc2.id)).num_requests).toBe(seen.b);

      const ids = new Set<string>();
      for await (const m of await client.requestMany(`$SRV.PING.${NAME}`, "", { maxWait: 1_000, maxMessages: 2 })) {
        ids.add(m.json<{ id: string }>().id);
      }
      expect(ids).toEqual(new Set([svc.id, svc2.id]));
      const ls = await natsCli(server, ["micro", "ls"]);
      expect(ls.stdout).toContain(svc2.id);
    } finally {
      await svc2.stop();
    }
    // after stop() only the first instance answers
    await waitFor(async () => (await srv<{ id: string }>(`$SRV.PING.${NAME}`)).id === svc.id, { timeoutMs: 5_000, describe: "svc2 gone" });
    const after = await client.request("runway.v1.z.echo", "x", { timeout: 2_000 });
    expect(after.json()).toMatchObject({ instance: "a" });
  });

  it("stop() waits for running handlers and leaves no responders", async () => {
    const nc3 = await connect(server.connectOptions());
    connections.push(nc3);
    const svc3 = new MicroService(nc3, { name: "runway_micro_stop", version: "0.1.0" });
    let finished = false;
    svc3.addEndpoint("wait", {
      subject: "runway.v1.stop.wait",
      handler: async (req) => {
        await new Promise((r) => setTimeout(r, 100));
        finished = true;
        req.respond("bye");
      },
    });
    await svc3.start();
    const pending = client.request("runway.v1.stop.wait", "", { timeout: 2_000 });
    await new Promise((r) => setTimeout(r, 20));
    await svc3.stop();
    expect(finished).toBe(true);
    expect((await pending).string()).toBe("bye");
    await expect(client.request("runway.v1.stop.wait", "", { timeout: 500 })).rejects.toThrow();
  });

  it("passes request headers to the handler and response headers back", async () => {
    const h = headers();
    h.set("Rw-Test", "42");
    const msg = await client.request("runway.v1.h.echo", "with headers", { timeout: 2_000, headers: h });
    expect(msg.json()).toMatchObject({ header: "42" });
    expect(msg.headers?.get("Rw-Instance")).toBe("a");
  });
});
