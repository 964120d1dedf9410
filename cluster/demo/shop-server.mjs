// The demo's MCP tool server (stdio): a shop's order lookup and its refunds. Plain JavaScript, so a
// node spawns it without a TypeScript loader. Refunds are written to the file SHOP_LEDGER, one JSON
// line each, and applied once per Runway effect key: the demo reads the file to show that a refund
// happened once, whatever crashed around it.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const EFFECT_KEY_META = "io.runway/effect-key";
const ledger = process.env.SHOP_LEDGER ?? "";
const ORDERS = { "A-1001": { order: "A-1001", item: "espresso cups (set of 4)", paid_cents: 2_598, status: "delivered" } };

const refunds = () =>
  ledger && existsSync(ledger)
    ? readFileSync(ledger, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];
const text = (value) => [{ type: "text", text: JSON.stringify(value) }];

const server = new McpServer({ name: "shop", version: "1.0.0" });
server.registerTool(
  "lookup_order",
  {
    description: "An order: its item, what was paid (cents) and its status.",
    inputSchema: { order: z.string() },
    annotations: { readOnlyHint: true },
  },
  async ({ order }) => {
    const found = ORDERS[order] ?? { order, status: "unknown" };
    return { content: text(found), structuredContent: found };
  },
);
server.registerTool(
  "refund",
  {
    description: "Refunds an order (cents). Applied once per effect key.",
    inputSchema: { order: z.string(), amount_cents: z.number().int().positive(), reason: z.string().optional() },
    annotations: { readOnlyHint: false, idempotentHint: true, destructiveHint: true },
  },
  async ({ order, amount_cents, reason }, extra) => {
    const key = extra._meta?.[EFFECT_KEY_META];
    const done = refunds().find((r) => key && r.key === key);
    const refund = done ?? { key, order, amount_cents, reason: reason ?? null };
    if (!done && ledger) appendFileSync(ledger, `${JSON.stringify(refund)}\n`);
    return { content: text({ refunded: true, order, amount_cents }), structuredContent: { refunded: true, order, amount_cents } };
  },
);
await server.connect(new StdioServerTransport());
