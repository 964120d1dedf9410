import { describe, expect, it } from "vitest";
import { compileDefinition, type Plan } from "../../machines/index.js";

const agent = (extra: Record<string, unknown> = {}) => ({
  name: "helper",
  nodes: [{ id: "a", kind: "agent", model: "fake/gpt-x", instructions: "Be brief.", input: "${input.question}", tools: ["fx/get_value"], ...extra }],
});
const compile = (d: unknown) => compileDefinition(d, { handlers: new Set() });

describe("agent node definition", () => {
  it("compiles to a step carrying its loop, defaults filled in; the plan pins model and tools", () => {
    const c = compile(agent({ output_schema: { type: "object", required: ["answer"] } }));
    expect(c.ok).toBe(true);
    const plan = (c as { plan: Plan }).plan;
    expect(plan.nodes[0]).toMatchObject({
      id: "a",
      kind: "code",
      handler: "agent:fake/gpt-x",
      input: "${input.question}",
      timeout_ms: 300_000,
      agent: {
        model: "fake/gpt-x",
        instructions: "Be brief.",
        tools: ["fx/get_value"],
        max_turns: 10,
        max_tool_calls: 50,
        output_schema: { type: "object", required: ["answer"] },
      },
    });
    // Another model or tool list is another version (the digest input changes).
    const other = compile(agent({ tools: ["fx/get_value", "fx/set_value"] }));
    const again = compile(agent({ output_schema: { type: "object", required: ["answer"] } }));
    expect((again as { plan: Plan }).plan.definition_digest_input).toBe(plan.definition_digest_input);
    expect((other as { plan: Plan }).plan.definition_digest_input).not.toBe(plan.definition_digest_input);
  });

  it.each([
    ["no model", { model: undefined }],
    ["a model without its provider", { model: "gpt-x" }],
    ["a tool that is no server/tool", { tools: ["get_value"] }],
    ["a wildcard tool", { tools: ["fx/*"] }],
    ["a tool listed twice", { tools: ["fx/a", "fx/a"] }],
    ["zero turns", { max_turns: 0 }],
    ["a negative token ceiling", { max_tokens: -1 }],
    ["an unknown field", { temperature: 2 }],
    ["empty instructions", { instructions: "" }],
  ])("refuses %s with a typed error, never a crash", (_why, extra) => {
    const c = compile(agent(extra));
    expect(c.ok).toBe(false);
    expect((c as { errors: { code: string }[] }).errors[0]!.code).toBe("invalid_definition");
  });

  it("refuses an output schema outside the supported subset (invalid_input_schema)", () => {
    const c = compile(agent({ output_schema: { type: "object", oneOf: [] } }));
    expect(c.ok).toBe(false);
    expect((c as { errors: { code: string; path: string }[] }).errors[0]).toMatchObject({ code: "invalid_input_schema" });
  });

  it("an input template reads only upstream nodes (unknown_reference)", () => {
    const c = compile(agent({ input: "${steps.nope.output}" }));
    expect(c.ok).toBe(false);
    expect((c as { errors: { code: string }[] }).errors[0]!.code).toBe("unknown_reference");
  });
});
