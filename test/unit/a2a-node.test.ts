import { describe, expect, it } from "vitest";
import { compileDefinition, type Plan } from "../../machines/index.js";

const CARD = "https://agents.example.com/a2a/b/nap/.well-known/agent-card.json";
const def = (node: Record<string, unknown>) => ({
  name: "ask",
  nodes: [
    { id: "prep", kind: "code", handler: "h" },
    { id: "call", kind: "a2a", needs: ["prep"], ...node },
  ],
});

describe("the a2a node kind", () => {
  it("compiles to a code step calling through the tool journal: server a2a:<auth>, tool = the card URL, the message template as its input", () => {
    const c = compileDefinition(def({ agent: CARD, auth: "remote", message: { text: "${steps.prep.output}" }, timeout_ms: 5_000 }), {
      handlers: new Set(["h"]),
    });
    expect(c.ok).toBe(true);
    if (!c.ok) return;
    const plan: Plan = c.plan;
    expect(plan.nodes.find((n) => n.id === "call")).toMatchObject({
      kind: "code",
      handler: `a2a:${CARD}`,
      input: { text: "${steps.prep.output}" },
      timeout_ms: 5_000,
      tool: { server: "a2a:remote", tool: CARD },
    });
    const bare = compileDefinition(def({ agent: CARD, message: "hello" }), { handlers: new Set(["h"]) });
    expect(bare.ok && bare.plan.nodes.find((n) => n.id === "call")).toMatchObject({ tool: { server: "a2a:", tool: CARD }, input: "hello" });
  });

  it("refuses a bad agent URL, credentials in the URL, a bad auth name, a missing or null message, an unknown field and an unreadable reference", () => {
    const bad: Record<string, unknown>[] = [
      { agent: "not a url", message: "x" },
      { agent: "ftp://agents.example.com/card.json", message: "x" },
      { agent: "https://user:secret@agents.example.com/card.json", message: "x" },
      { agent: `https://agents.example.com/${"a".repeat(200)}`, message: "x" },
      { agent: CARD, auth: "a b", message: "x" },
      { agent: CARD },
      { agent: CARD, message: null },
      { agent: CARD, message: "x", token: "secret" },
    ];
    for (const node of bad) {
      const c = compileDefinition(def(node), { handlers: new Set(["h"]) });
      expect(c.ok, JSON.stringify(node)).toBe(false);
      if (!c.ok) expect(c.errors[0]?.code).toBe("invalid_definition");
    }
    const ref = compileDefinition(def({ agent: CARD, message: "${steps.nowhere.output}" }), { handlers: new Set(["h"]) });
    expect(ref.ok).toBe(false);
    if (!ref.ok) expect(ref.errors[0]?.code).toBe("unknown_reference");
  });
});
