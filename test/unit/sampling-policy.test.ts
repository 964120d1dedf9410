import { describe, expect, it } from "vitest";
import { checkSampling } from "../../gateways/tools/sampling.js";
import { samplingKey } from "../../actors/agent/sampling.js";

const POLICY = { models: ["oa/fake-gpt", "an/claude-x"], max_tokens: 100 };
const text = (t: string) => ({ type: "text", text: t });

describe("38.7 a server's sampling/createMessage against its sampling policy", () => {
  it("38.7 a text request becomes a model request: system prompt first, content arrays joined, max tokens kept", () => {
    const checked = checkSampling(
      "s",
      POLICY,
      {
        messages: [
          { role: "user", content: text("hi") },
          { role: "assistant", content: [text("a"), text("b")] },
        ],
        systemPrompt: "Be brief.",
        maxTokens: 40,
        temperature: 0.5,
      },
      1,
      2,
    );
    expect(checked.ok).toBe(true);
    if (!checked.ok) return;
    expect(checked.ask).toMatchObject({
      model: "oa/fake-gpt",
      round: 1,
      index: 2,
      request: {
        max_tokens: 40,
        temperature: 0.5,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "hi" },
          { role: "assistant", content: "a\nb" },
        ],
      },
    });
    expect(checked.ask.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("38.7 the model: the first allowed one a hint names (whole or after the slash), else the policy's first", () => {
    const ask = (hints: { name?: string }[]) => {
      const c = checkSampling("s", POLICY, { messages: [{ role: "user", content: text("x") }], maxTokens: 1, modelPreferences: { hints } }, 0, 0);
      return c.ok ? c.ask.model : c.message;
    };
    expect(ask([{ name: "claude-x" }])).toBe("an/claude-x");
    expect(ask([{ name: "gpt-9" }, { name: "an/claude-x" }])).toBe("an/claude-x");
    expect(ask([{ name: "gpt-9" }, {}])).toBe("oa/fake-gpt");
  });

  it("38.7 refusals carry the MCP error code: no policy or too many tokens -32600, malformed or non-text params -32602", () => {
    const fine = { messages: [{ role: "user", content: text("x") }], maxTokens: 10 };
    expect(checkSampling("s", undefined, fine, 0, 0)).toMatchObject({ ok: false, mcp_code: -32600, code: "tool_sampling_refused" });
    expect(checkSampling("s", POLICY, { ...fine, maxTokens: 101 }, 0, 0)).toMatchObject({ ok: false, mcp_code: -32600 });
    for (const bad of [
      null,
      "nope",
      { messages: "x", maxTokens: 1 },
      { messages: [], maxTokens: 1 },
      { ...fine, maxTokens: 0 },
      { messages: [{ role: "user", content: { type: "image", data: "AAAA", mimeType: "image/png" } }], maxTokens: 1 },
      { messages: [{ role: "system", content: text("x") }], maxTokens: 1 },
      { ...fine, tools: [{ name: "t", inputSchema: { type: "object" } }] },
    ])
      expect(checkSampling("s", POLICY, bad, 0, 0), JSON.stringify(bad)).toMatchObject({ ok: false, mcp_code: -32602, code: "tool_sampling_refused" });
  });

  it("38.7 the sampling's effect key is the call's, its round and place, and the params' hash: the same request of the same call is the same key", () => {
    const a = checkSampling("s", POLICY, { messages: [{ role: "user", content: text("x") }], maxTokens: 10 }, 0, 0);
    const b = checkSampling("s", POLICY, { maxTokens: 10, messages: [{ content: text("x"), role: "user" }] }, 0, 0);
    const c = checkSampling("s", POLICY, { messages: [{ role: "user", content: text("y") }], maxTokens: 10 }, 0, 0);
    if (!a.ok || !b.ok || !c.ok) throw new Error("refused");
    expect(samplingKey("run:node:h", a.ask)).toBe(samplingKey("run:node:h", b.ask));
    expect(samplingKey("run:node:h", a.ask)).not.toBe(samplingKey("run:node:h", c.ask));
    expect(samplingKey("run:node:h", a.ask)).not.toBe(samplingKey("run:node:h", { ...a.ask, round: 1 }));
    expect(samplingKey("run:node:h", a.ask)).toMatch(/^run:node:h:sample0\.0:[0-9a-f]{32}$/);
  });
});
