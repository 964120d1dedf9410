/**
 * agent: what the runtime adds to an agent's turns and tool calls, on one in-process node.
 *
 * - `loop`: AGENT_RUNS (default 100) agent runs, one after another, each 5 turns of 2 tool calls
 *   (`get_value` on a stdio MCP server, the effects fixture) and a sixth turn that answers; the
 *   scripted provider answers at once. From each run's trajectory: a turn's runtime overhead is
 *   the time from its intent to the next turn's, less the provider's latency and the durations
 *   of the turn's tool calls (what is left: the turn's intent and receipt writes and the loop); a
 *   tool call's duration (intent → receipt, through the gateway) beside a direct MCP call to the
 *   same server, and the provider's own round trip, all measured in this run. Target: ≤ 2 ms per
 *   turn beyond the provider.
 * - `waiting`: AGENT_WAITING (default 10,000) agent runs whose model answers after 2 s, started
 *   together: the node's heap growth while they wait, the worker threads they hold (target 0:
 *   the loop runs on the event loop), and turns/s once the answers come.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { connect } from "@nats-io/transport-node";
import { fileURLToPath } from "node:url";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode } from "../../cluster/runway-node.js";
import { createModelProvider, ModelProviderRecord } from "../../gateways/models/index.js";
import { createLogger } from "../../runtime/index.js";
import { startEffectsServer } from "../fixtures/mcp/start.js";
import { startServer, waitFor } from "../harness/index.js";
import { percentiles, progress } from "./stats.js";
import { runEnds } from "./workflow.js";

const TENANT = "bench";
const TOOL_TURNS = 5;
const CALLS_PER_TURN = 2;
const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

type Line = { kind: string; node?: string; turn?: number; started_at?: number; latency_ms?: number; duration_ms?: number; key?: string };

/** The script every loop run follows: 5 turns of 2 distinct `get_value` calls, then the answer. */
function loopScript(): Record<string, unknown> {
  const turns: Record<string, unknown>[] = [];
  for (let t = 0; t < TOOL_TURNS; t++)
    turns.push({
      tool_calls: Array.from({ length: CALLS_PER_TURN }, (_, c) => ({ name: "fx__get_value", arguments: { key: `k${t}-${c}` } })),
      usage: { input_tokens: 100, output_tokens: 10 },
    });
  turns.push({ text: "done", usage: { input_tokens: 100, output_tokens: 2 } });
  return { turns, chunk_chars: 64 };
}

export async function agent(): Promise<Record<string, unknown>> {
  const runs = Number(process.env.AGENT_RUNS ?? 100);
  const waitingRuns = Number(process.env.AGENT_WAITING ?? 10_000);
  const server = await startServer();
  const fx = await startEffectsServer({ counterFile: "" });
  const node = await startRunwayNode({ connection: server.connectOptions(), name: "bench", handlers: [handlers], logger: createLogger("bench", "warn") });
  const nc = await connect({ ...server.connectOptions(), noAsyncTraces: true });
  const direct = new Client({ name: "runway-bench-direct", version: "0.0.0" });
  try {
    await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 30_000, describe: "partitions" });
    const client = new RunwayClient(nc, TENANT, 60_000);
    // The loop's runs have ended when the waiting ones start: the waiting ones alone count (at most the settings' 10,000).
    const created = await client.createTenant(TENANT, { max_concurrency: Math.min(waitingRuns, 10_000) });
    if (created.outcome !== "created") throw new Error(`tenants.create: ${JSON.stringify(created)}`);
    const cmd = fx.command!;
    const saved = await client.putToolServer({ name: "fx", transport: { type: "stdio", command: cmd.command, args: cmd.args, env: cmd.env }, trusted: true });
    if (saved.outcome !== "saved") throw new Error(`tools.servers.put: ${JSON.stringify(saved)}`);
    await client.putModelProvider({ name: "fast", kind: "scripted", script: loopScript() });
    await client.putModelProvider({
      name: "slow",
      kind: "scripted",
      script: { turns: [{ text: "late", usage: { input_tokens: 10, output_tokens: 1 } }], delay_ms: 2_000 },
    });
    const agentNode = (model: string, tools: string[]) => ({
      id: "ask",
      kind: "agent",
      model,
      instructions: "Use the tools.",
      input: "${input.q}",
      tools,
      max_turns: 10,
    });
    await client.putDefinition({ name: "loop", nodes: [agentNode("fast/m", ["fx/get_value"])] });
    await client.putDefinition({ name: "waiting", nodes: [agentNode("slow/m", [])] });
    const finished = await runEnds(nc, TENANT);

    // The raw costs beside which the runtime's are read: the provider's round trip and a direct MCP call.
    const parsed = ModelProviderRecord.parse({ name: "raw", kind: "scripted", script: loopScript() });
    if (parsed.outcome !== "valid") throw new Error(`scripted provider: ${parsed.reason}`);
    const provider = createModelProvider(parsed.record);
    const raw: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await provider.complete({ model: "m", messages: [{ role: "user", content: "q" }] });
      raw.push(performance.now() - t0);
    }
    await direct.connect(new StdioClientTransport({ command: cmd.command, args: cmd.args, env: cmd.env, stderr: "ignore" }));
    const directMs: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await direct.callTool({ name: "get_value", arguments: { key: "k" } });
      directMs.push(performance.now() - t0);
    }

    progress(`agent loop: ${runs} runs × ${TOOL_TURNS + 1} turns, ${TOOL_TURNS * CALLS_PER_TURN} tool calls each, one at a time`);
    const turnOverhead: number[] = [];
    const providerMs: number[] = [];
    const callMs: number[] = [];
    const runMs: number[] = [];
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      const started = await client.startRun({ definition: "loop", input: { q: `run ${r}` } });
      const id = (started.run as { id: string }).id;
      if ((await finished(id)) !== "run_succeeded") throw new Error(`run ${id}: ${JSON.stringify((await client.getRun(id)).run)}`);
      runMs.push(performance.now() - t0);
      const lines = ((await client.trajectory(id)).lines ?? []) as Line[];
      const turns = lines.filter((l) => l.kind === "model_turn").sort((a, b) => a.turn! - b.turn!);
      const calls = lines.filter((l) => l.kind === "tool_call");
      for (const c of calls) callMs.push(c.duration_ms ?? 0);
      for (let t = 0; t < turns.length - 1; t++) {
        const turn = turns[t]!;
        const own = calls.filter((c) => c.key?.includes(`:turn${turn.turn}:`)).reduce((sum, c) => sum + (c.duration_ms ?? 0), 0);
        turnOverhead.push(turns[t + 1]!.started_at! - turn.started_at! - (turn.latency_ms ?? 0) - own);
        providerMs.push(turn.latency_ms ?? 0);
      }
    }

    progress(`agent waiting: ${waitingRuns} runs whose model answers after 2 s`);
    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    let peakInFlight = 0;
    let peakHeap = heapBefore;
    let peakThreads = 0;
    const sampler = setInterval(() => {
      peakInFlight = Math.max(peakInFlight, node.executor.inFlight);
      peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
      peakThreads = Math.max(peakThreads, node.pool.stats().running);
    }, 50);
    const ends: number[] = [];
    const startedAt = performance.now();
    const ids: string[] = [];
    for (let i = 0; i < waitingRuns; i += 200) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(200, waitingRuns - i) }, (_, j) => client.startRun({ definition: "waiting", input: { q: `w${i + j}` } })),
      );
      for (const s of batch) ids.push((s.run as { id: string }).id);
    }
    const startMs = performance.now() - startedAt;
    const outcomes = await Promise.all(
      ids.map(async (id) => {
        const type = await finished(id);
        ends.push(performance.now());
        return type;
      }),
    );
    clearInterval(sampler);
    const failed = outcomes.filter((o) => o !== "run_succeeded").length;
    ends.sort((a, b) => a - b);
    const answering = (ends.at(-1)! - ends[0]!) / 1000;

    const round = (x: number) => Math.round(x * 1000) / 1000;
    const overhead = percentiles(turnOverhead);
    return {
      loop: {
        runs,
        turns_per_run: TOOL_TURNS + 1,
        tool_calls_per_run: TOOL_TURNS * CALLS_PER_TURN,
        turn_overhead_ms: overhead,
        provider_round_trip_ms: percentiles(raw),
        provider_latency_in_runs_ms: percentiles(providerMs),
        tool_call_ms: percentiles(callMs),
        direct_mcp_call_ms: percentiles(directMs),
        tool_call_overhead_p50_ms: round(percentiles(callMs).p50 - percentiles(directMs).p50),
        run_ms: percentiles(runMs),
        target_turn_overhead_p50_ms: 2,
        meets_target: overhead.p50 <= 2,
      },
      waiting: {
        runs: waitingRuns,
        failed,
        start_all_ms: Math.round(startMs),
        peak_agents_in_flight: peakInFlight,
        heap_growth_mb: round((peakHeap - heapBefore) / 2 ** 20),
        target_heap_growth_mb: 500,
        worker_threads_held_peak: peakThreads,
        turns_per_s_answering: round(waitingRuns / Math.max(answering, 0.001)),
      },
    };
  } finally {
    await direct.close().catch(() => undefined);
    await nc.close();
    await node.stop();
    await fx.stop();
    await server.dispose();
  }
}
