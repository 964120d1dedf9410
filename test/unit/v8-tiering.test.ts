import { describe, expect, it } from "vitest";
import { TIERING_FLAGS, tierUpSooner } from "../../cluster/v8-tiering.js";

describe("V8 tiering of a node", () => {
  it("RUNWAY_V8_TIERING=default keeps V8's own budget; anything else sets the node's", () => {
    expect(tierUpSooner({ RUNWAY_V8_TIERING: "default" })).toBe(false);
    expect(tierUpSooner({})).toBe(true);
    expect(tierUpSooner({ RUNWAY_V8_TIERING: "" })).toBe(true);
    expect(TIERING_FLAGS).toMatch(/^--interrupt-budget=\d+$/);
  });
});
