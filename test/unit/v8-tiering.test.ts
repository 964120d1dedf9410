import { describe, expect, it } from "vitest";
import { applyV8Tiering, TIERING_FLAGS, v8TieringOf } from "../../cluster/v8-tiering.js";

describe("V8 tiering of a node (RUNWAY_V8_TIERING)", () => {
  it("unset or default keeps V8's budget, sooner lowers it, anything else is no setting", () => {
    expect(v8TieringOf({})).toBe("default");
    expect(v8TieringOf({ RUNWAY_V8_TIERING: "" })).toBe("default");
    expect(v8TieringOf({ RUNWAY_V8_TIERING: "default" })).toBe("default");
    expect(v8TieringOf({ RUNWAY_V8_TIERING: "sooner" })).toBe("sooner");
    expect(v8TieringOf({ RUNWAY_V8_TIERING: "Sooner" })).toBeUndefined();
    expect(v8TieringOf({ RUNWAY_V8_TIERING: "--interrupt-budget=1" })).toBeUndefined();
  });

  it("applying says which flags it set", () => {
    expect(applyV8Tiering("default")).toBe("default");
    expect(applyV8Tiering("sooner")).toBe(TIERING_FLAGS);
    expect(TIERING_FLAGS).toMatch(/^--interrupt-budget=\d+$/);
  });
});
