/**
 * The demo's second act: an agent (a scripted model, so it needs no key and answers the same every
 * time) looks an order up with an MCP tool, proposes a refund that waits for a person, the node is
 * SIGKILLed while it waits, a person approves from the `runway` command line, and the agent
 * streams its answer. The refund happens once (the shop server's ledger), and no model turn is
 * asked twice (the run's trajectory).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { NatsConnection } from "@nats-io/transport-node";
import type { RunwayClient } from "../client.js";
import { followRun } from "../follow.js";
import { demoModel, supportAgent } from "./workflows.js";

const here = dirname(fileURLToPath(import.meta.url));

export interface AgentAct {
  nc: NatsConnection;
  client: RunwayClient;
  natsUrl: string;
  /** Where the shop server writes its refunds. */
  ledger: string;
  say(line: string): void;
  /** Seconds since the demo began, for the event lines. */
  elapsed(): string;
  /** SIGKILLs the node and starts it again. */
  killAndRestartNode(): Promise<void>;
}

/** Runs the act; answers whether it showed what it should (the run succeeded, one refund). */
export async function agentAct(act: AgentAct): Promise<boolean> {
  const { client, say } = act;
  say("");
  say("▶ an agent: a scripted model, the shop's MCP tools, a refund that waits for a person");
  const server = await client.putToolServer({
    name: "shop",
    transport: { type: "stdio", command: process.execPath, args: [join(here, "shop-server.mjs")], env: { SHOP_LEDGER: act.ledger } },
    trusted: true,
  });
  const { provider, model, scripted } = demoModel(process.env);
  const put = await client.putModelProvider(provider);
  const agent = { ...supportAgent, nodes: supportAgent.nodes.map((n) => ({ ...n, model })) };
  const published = await client.putDefinition(agent);
  say(
    `▶ tool server shop: ${server.outcome}; model ${model} (${scripted ? "scripted" : String(provider.base_url)}): ${put.outcome}; ${agent.name}: ${published.outcome}`,
  );
  const started = await client.startRun({ definition: supportAgent.name, input: { message: "Order A-1001 arrived broken. Can I have my money back?" } });
  const run = (started.run as { id: string }).id;
  say(`▶ run ${run}: ${started.outcome}`);

  let streamed = "";
  let approved = false;
  for await (const e of followRun(act.nc, client, "demo", run, { pollMs: 500 })) {
    if (e.type === "text_delta") {
      streamed += String(e.text);
      say(`  ${act.elapsed()}  text_delta      ${JSON.stringify(e.text)}`);
      continue;
    }
    const detail = [e.node, e.tool, e.decision, e.on].filter((x) => x !== undefined).join(" ");
    say(`  ${act.elapsed()}  ${e.type.padEnd(15)} ${detail}`);
    if (e.type === "approval_requested" && !approved) {
      approved = true;
      say("  ✖ SIGKILL the node while the refund waits for a person; restarting it");
      await act.killAndRestartNode();
      const id = String(e.approval);
      say(`  ▶ a person approves from the command line: runway approvals approve ${id}`);
      const cli = spawnSync(process.execPath, [join(here, "..", "..", "bin", "runway.mjs"), "approvals", "approve", id], {
        env: { ...process.env, RUNWAY_SERVERS: act.natsUrl, RUNWAY_TENANT: "demo" },
        encoding: "utf8",
      });
      say(`    ${cli.status === 0 ? String((JSON.parse(cli.stdout) as { outcome?: unknown }).outcome) : cli.stderr.trim()}`);
    }
  }

  const final = (await client.getRun(run)).run as { status: string; result: unknown };
  const trajectory = ((await client.trajectory(run)).lines ?? []) as { kind: string }[];
  const turns = trajectory.filter((line) => line.kind === "model_turn").length;
  const refunds = existsSync(act.ledger) ? readFileSync(act.ledger, "utf8").trim().split("\n").filter(Boolean).length : 0;
  say("");
  say("agent summary");
  say(`  run                ${run}`);
  say(`  status             ${final.status}`);
  const answer = JSON.stringify(final.result);
  say(`  answer             ${answer.length > 100 ? `${answer.slice(0, 100)}…` : answer}`);
  say(`  streamed           ${streamed.length} characters as live text_delta events`);
  say(`  model turns        ${turns}, each journaled once: after the restart the agent went on from the journal`);
  say(`  refunds            ${refunds}${refunds === 1 ? " — applied once, approved by a person, across a SIGKILL" : scripted ? " — EXPECTED ONE" : ""}`);
  // A real model decides for itself whether to refund; the scripted one always does, once.
  return final.status === "succeeded" && (!scripted || refunds === 1);
}
