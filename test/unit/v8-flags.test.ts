import { describe, expect, it } from "vitest";
import { applyV8Inlining, applyV8Tiering, LEAN_INLINING_FLAGS, TIERING_FLAGS, V8_INLINING, V8_TIERING } from "../../cluster/v8-flags.js";

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

describe("V8 tiering of a node (RUNWAY_V8_TIERING)", () => {
  it("unset or default keeps V8's budget, sooner lowers it, anything else is no setting", () => {
    expect(V8_TIERING.of({})).toBe("default");
    expect(V8_TIERING.of({ RUNWAY_V8_TIERING: "" })).toBe("default");
    expect(V8_TIERING.of({ RUNWAY_V8_TIERING: "default" })).toBe("default");
    expect(V8_TIERING.of({ RUNWAY_V8_TIERING: "sooner" })).toBe("sooner");
    expect(V8_TIERING.of({ RUNWAY_V8_TIERING: "Sooner" })).toBeUndefined();
    expect(V8_TIERING.of({ RUNWAY_V8_TIERING: "--interrupt-budget=1" })).toBeUndefined();
    expect(V8_TIERING.refusal({ RUNWAY_V8_TIERING: "soon" })).toBe('RUNWAY_V8_TIERING: "default" or "sooner", not "soon"');
  });

  it("applying says which flags it set", () => {
    expect(applyV8Tiering("default")).toBe("default");
    expect(applyV8Tiering("sooner")).toBe(TIERING_FLAGS);
    expect(TIERING_FLAGS).toMatch(/^--interrupt-budget=\d+$/);
  });
});
