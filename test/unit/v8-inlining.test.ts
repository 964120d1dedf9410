import { describe, expect, it } from "vitest";
import { applyV8Inlining, LEAN_INLINING_FLAGS, V8_INLINING } from "../../cluster/v8-inlining.js";

describe("V8 inlining budget of a node (RUNWAY_V8_INLINING)", () => {
  it("unset or lean lowers V8's budgets, full keeps V8's own, anything else is no setting", () => {
    expect(V8_INLINING.of({})).toBe("lean");
    expect(V8_INLINING.of({ RUNWAY_V8_INLINING: "" })).toBe("lean");
    expect(V8_INLINING.of({ RUNWAY_V8_INLINING: "lean" })).toBe("lean");
    expect(V8_INLINING.of({ RUNWAY_V8_INLINING: "full" })).toBe("full");
    expect(V8_INLINING.of({ RUNWAY_V8_INLINING: "Lean" })).toBeUndefined();
    expect(V8_INLINING.of({ RUNWAY_V8_INLINING: "--max-inlined-bytecode-size-cumulative=1" })).toBeUndefined();
    expect(V8_INLINING.refusal({ RUNWAY_V8_INLINING: "half" })).toBe('RUNWAY_V8_INLINING: "lean" or "full", not "half"');
  });

  it("applying says which flags it set", () => {
    expect(applyV8Inlining("full")).toBe("full");
    expect(applyV8Inlining("lean")).toBe(LEAN_INLINING_FLAGS);
    expect(LEAN_INLINING_FLAGS).toBe("--max-inlined-bytecode-size-cumulative=690 --max-inlined-bytecode-size=300");
  });
});
