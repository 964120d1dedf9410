import { expect, it } from "vitest";
import { applyV8Inlining, applyV8Tiering, LEAN_INLINING_FLAGS, TIERING_FLAGS } from "../../cluster/v8-flags.js";

// How each setting is read: env-settings.test.ts.
it("RUNWAY_V8_INLINING: applying says which flags it set", () => {
  expect(applyV8Inlining("full")).toBe("full");
  expect(applyV8Inlining("lean")).toBe(LEAN_INLINING_FLAGS);
  expect(LEAN_INLINING_FLAGS).toBe("--max-inlined-bytecode-size-cumulative=690 --max-inlined-bytecode-size=300");
});

it("RUNWAY_V8_TIERING: applying says which flags it set", () => {
  expect(applyV8Tiering("default")).toBe("default");
  expect(applyV8Tiering("sooner")).toBe(TIERING_FLAGS);
  expect(TIERING_FLAGS).toMatch(/^--interrupt-budget=\d+$/);
});
