import { describe, expect, it } from "vitest";
import { applyV8Tiering, TIERING_FLAGS, V8_TIERING } from "../../cluster/v8-tiering.js";

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
