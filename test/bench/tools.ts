/**
 * tools: what the MCP tool gateway adds to a tool call, per transport (stdio, Streamable HTTP),
 * against the effects fixture server's cheap read-only `get_value`:
 *
 * - `direct`: an MCP SDK client connected straight to the server;
 * - `gateway`: the same call through `ToolGateway.call` (registry read on the bench's NATS server,
 *   pooled session from `ToolConnections`, a fresh effect key per call);
 * - `tool_node_run`: a one-node workflow `{kind: "tool"}` on an in-process Runway node, from
 *   `startRun` to its `run_succeeded` event (one run in flight).
 *
 * Direct and gateway calls alternate one by one (one in flight), so both see the same machine
 * state. The fixture counts calls in memory (`MCP_COUNTER_FILE` empty) rather than in its counter
 * file: the file's locked read-modify-write grows with every effect key and would only add noise
 * on the server side, equally to both paths.
 *
 * Env: TOOLS_N calls per path (default 300, after 50 warm-up calls); TOOLS_RUNS runs per
 * transport (default TOOLS_N if set, else 100).
 */
import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { EFFECT_KEY_META } from "../../actors/index.js";
import { ToolConnections, ToolGateway, ToolRegistry } from "../../gateways/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { percentiles, progress } from "./stats.js";
import { world, type World } from "./workflow.js";

const TENANT = "bench";
const WARM_UP = 50;
const RUN_WARM_UP = 10;
/** A run that has not ended in this long fails the bench rather than hanging it. */
const RUN_TIMEOUT_MS = 30_000;
const CALL_TIMEOUT_MS = 30_000;

type Transport = "stdio" | "http";

const round = (x: number) => Math.round(x * 1000) / 1000;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms))),
  ]);
}

/** An MCP client straight to the fixture, as the gateway's own sessions are opened. */
async function directClient(transport: Transport, fixture: EffectsServerHandle): Promise<Client> {
  const client = new Client({ name: "runway-bench-direct", version: "0.0.0" });
  const cmd = fixture.command;
  const t =
    transport === "stdio"
      ? new StdioClientTransport({ command: cmd!.command, args: cmd!.args, env: cmd!.env, stderr: "ignore" })
      : new StreamableHTTPClientTransport(new URL(fixture.url!));
  await client.connect(t, { timeout: CALL_TIMEOUT_MS });
  return client;
}

export async function tools(): Promise<Record<string, unknown>> {
  const calls = Number(process.env.TOOLS_N ?? 300);
  const runs = Number(process.env.TOOLS_RUNS ?? process.env.TOOLS_N ?? 100);
  const fixtures: EffectsServerHandle[] = [];
  const directs: Client[] = [];
  const connections = new ToolConnections({ name: "runway-bench-gateway", version: "0.0.0" });
  let w: World | undefined;
  try {
    progress("tools: nats-server, a Runway node, the effects fixture (stdio and HTTP)");
    w = await world();
    const fixtureOf: Record<Transport, EffectsServerHandle> = {
      stdio: await startEffectsServer({ counterFile: "" }),
      http: await startEffectsServer({ http: true, counterFile: "" }),
    };
    fixtures.push(fixtureOf.stdio, fixtureOf.http);
    const serverOf: Record<Transport, string> = { stdio: "fx-stdio", http: "fx-http" };
    const cmd = fixtureOf.stdio.command!;
    // Trusted: `get_value`'s read-only annotation counts, as it would for a vetted server.
    for (const [name, transport] of [
      [serverOf.stdio, { type: "stdio", command: cmd.command, args: cmd.args, env: cmd.env }],
      [serverOf.http, { type: "http", url: fixtureOf.http.url }],
    ] as const) {
      const saved = await w.client.putToolServer({ name, transport, trusted: true });
      if (saved.outcome !== "saved") throw new Error(`tools.servers.put ${name}: ${JSON.stringify(saved)}`);
    }
    // The real gateway object, on the bench's own connection to the same registry bucket.
    const registry = new ToolRegistry(w.nc);
    const gateway = new ToolGateway(registry, connections);
    const out: Record<string, unknown> = {};

    for (const transport of ["stdio", "http"] as const) {
      const server = serverOf[transport];
      const direct = await directClient(transport, fixtureOf[transport]);
      directs.push(direct);
      const callDirect = async (key: string) => {
        const r = await direct.callTool({ name: "get_value", arguments: { key: "k" }, _meta: { [EFFECT_KEY_META]: key } }, undefined, {
          timeout: CALL_TIMEOUT_MS,
        });
        if (r.isError) throw new Error(`direct ${transport}: ${JSON.stringify(r)}`);
      };
      const viaGateway = async (gw: ToolGateway, key: string) => {
        const r = await gw.call({
          tenant: TENANT,
          server,
          tool: "get_value",
          arguments: { key: "k" },
          key,
          allowTask: false,
          timeoutMs: CALL_TIMEOUT_MS,
          // One signal per call, as the executor gives each attempt its own: the SDK never removes
          // the abort listener it adds to a request's signal, so a shared one would pile them up.
          signal: new AbortController().signal,
        });
        if (r.outcome !== "ok" || r.result.isError) throw new Error(`gateway ${transport}: ${JSON.stringify(r)}`);
      };
      // What the gateway would cost with its registry read served from memory (a KV-watch-fed
      // cache, say): the same gateway code over the same pooled sessions, the record held here.
      const record = await registry.get(TENANT, server);
      if (!record) throw new Error(`no registry record for ${server}`);
      const cached = new ToolGateway({ get: async () => record, onChange: () => undefined } as unknown as ToolRegistry, connections);

      progress(`tools ${transport}: ${WARM_UP} warm-up + ${calls} calls each: direct, through the gateway, and its steps alone (interleaved)`);
      for (let i = 0; i < WARM_UP; i++) {
        await callDirect(`warm-d-${transport}-${i}`);
        await viaGateway(gateway, `warm-g-${transport}-${i}`);
        await viaGateway(cached, `warm-c-${transport}-${i}`);
        await registry.get(TENANT, server);
      }
      const d: number[] = [];
      const g: number[] = [];
      const c: number[] = [];
      // The gateway's steps before the MCP call, timed alone right after a call (as in the
      // gateway path: a read measured in a tight loop of its own comes out cheaper).
      const reg: number[] = [];
      const conn: number[] = [];
      for (let i = 0; i < calls; i++) {
        d.push(await timed(() => callDirect(`d-${transport}-${i}-${randomUUID()}`)));
        g.push(await timed(() => viaGateway(gateway, `g-${transport}-${i}-${randomUUID()}`)));
        reg.push(await timed(() => registry.get(TENANT, server)));
        c.push(await timed(() => viaGateway(cached, `c-${transport}-${i}-${randomUUID()}`)));
        conn.push(await timed(() => connections.get(record)));
      }

      progress(`tools ${transport}: ${RUN_WARM_UP} warm-up + ${runs} runs of a one-node tool workflow, one in flight`);
      const definition = `tools-${transport}`;
      const put = await w.client.putDefinition({ name: definition, nodes: [{ id: "get", kind: "tool", server, tool: "get_value", arguments: { key: "k" } }] });
      if (!/published|unchanged/.test(put.outcome)) throw new Error(`definitions.put: ${JSON.stringify(put)}`);
      const runOnce = async (): Promise<number> => {
        const t0 = performance.now();
        const started = await w!.client.startRun({ definition });
        if (started.outcome !== "started") throw new Error(`start: ${JSON.stringify(started)}`);
        const id = (started.run as { id: string }).id;
        const ended = await withTimeout(w!.finished(id), RUN_TIMEOUT_MS, `run ${id}`);
        if (ended !== "run_succeeded") throw new Error(`run ${id}: ${ended} (${JSON.stringify(await w!.client.getRun(id))})`);
        return performance.now() - t0;
      };
      for (let i = 0; i < RUN_WARM_UP; i++) await runOnce();
      const r: number[] = [];
      for (let i = 0; i < runs; i++) r.push(await runOnce());

      const dp = percentiles(d);
      const gp = percentiles(g);
      const rp = percentiles(reg);
      const cp = percentiles(conn);
      const kp = percentiles(c);
      out[transport] = {
        direct_ms: dp,
        gateway_ms: gp,
        gateway_overhead_ms_p50: round(gp.p50 - dp.p50),
        gateway_overhead_ms_mean: round(gp.mean - dp.mean),
        // The gateway's steps alone: the registry KV read (a JetStream direct get) and the pooled session look-up.
        registry_get_ms: rp,
        connection_get_ms: cp,
        // The same gateway with the registry record in memory, and its overhead over direct.
        gateway_cached_registry_ms: kp,
        gateway_cached_registry_overhead_ms_p50: round(kp.p50 - dp.p50),
        tool_node_run_ms: percentiles(r),
      };
    }
    const overheads = (["stdio", "http"] as const).map((t) => (out[t] as { gateway_overhead_ms_p50: number }).gateway_overhead_ms_p50);
    return {
      bench: "tools",
      calls,
      warm_up: WARM_UP,
      runs,
      ...out,
      target: { gateway_overhead_ms_p50_max: 1 },
      target_met: overheads.every((o) => o <= 1),
    };
  } finally {
    for (const c of directs) await c.close().catch(() => undefined);
    await connections.close();
    for (const f of fixtures) await f.stop().catch(() => undefined);
    await w?.close();
  }
}
