import { expect, it } from "vitest";
import type { EnvSetting } from "../../cluster/env-setting.js";
import { EVENT_LOOP_SPIN } from "../../cluster/event-loop-spin.js";
import { HELPER_THREADS } from "../../cluster/helper-threads.js";
import { V8_INLINING, V8_TIERING } from "../../cluster/v8-flags.js";

// Every setting a node reads from its environment: unset or empty is its first word, its other
// word is taken as written, anything else (another case, a raw flag) is no setting and the
// refusal says which words it takes.
it.each<[string, EnvSetting<string>, string, string, string]>([
  ["RUNWAY_V8_INLINING", V8_INLINING, "lean", "full", "--max-inlined-bytecode-size-cumulative=1"],
  ["RUNWAY_V8_TIERING", V8_TIERING, "default", "sooner", "--interrupt-budget=1"],
  ["RUNWAY_HELPER_THREADS", HELPER_THREADS, "low", "normal", "10"],
  ["RUNWAY_EVENT_LOOP_SPIN", EVENT_LOOP_SPIN, "on", "off", "1ms"],
])("%s: unset or empty is the first word, the other is taken, anything else is refused", (variable, setting, first, other, foreign) => {
  expect(setting.variable).toBe(variable);
  const v = variable;
  expect(setting.of({})).toBe(first);
  expect(setting.of({ [v]: "" })).toBe(first);
  expect(setting.of({ [v]: first })).toBe(first);
  expect(setting.of({ [v]: other })).toBe(other);
  expect(setting.of({ [v]: first.toUpperCase() })).toBeUndefined();
  expect(setting.of({ [v]: foreign })).toBeUndefined();
  expect(setting.refusal({ [v]: foreign })).toBe(`${v}: "${first}" or "${other}", not "${foreign}"`);
});
