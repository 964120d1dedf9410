import { expect, it } from "vitest";
import type { EnvSetting } from "../../cluster/env-setting.js";
import { EVENT_LOOP_SPIN } from "../../cluster/event-loop-spin.js";
import { HELPER_THREADS } from "../../cluster/helper-threads.js";
import { hostProfile, RUNWAY_PROFILE, SMALL_HOST_CORES } from "../../cluster/host-profile.js";

// Every setting a node reads from its environment: unset or empty is its first word (for one that
// follows the host profile, under the small-host profile), its other word is taken as written,
// anything else (another case, a raw flag) is no setting and the refusal says which words it takes.
const SMALL = { RUNWAY_PROFILE: "small-host" };
it.each<[string, EnvSetting<string>, string, string, string]>([
  ["RUNWAY_HELPER_THREADS", HELPER_THREADS, "low", "normal", "10"],
  ["RUNWAY_EVENT_LOOP_SPIN", EVENT_LOOP_SPIN, "on", "off", "1ms"],
])("%s: unset or empty is the first word, the other is taken, anything else is refused", (variable, setting, first, other, foreign) => {
  expect(setting.variable).toBe(variable);
  const v = variable;
  expect(setting.of({ ...SMALL, [v]: undefined })).toBe(first);
  expect(setting.of({ ...SMALL, [v]: "" })).toBe(first);
  expect(setting.of({ ...SMALL, [v]: first })).toBe(first);
  expect(setting.of({ ...SMALL, [v]: other })).toBe(other);
  expect(setting.of({ ...SMALL, [v]: first.toUpperCase() })).toBeUndefined();
  expect(setting.of({ ...SMALL, [v]: foreign })).toBeUndefined();
  expect(setting.refusal({ ...SMALL, [v]: foreign })).toBe(`${v}: "${first}" or "${other}", not "${foreign}"`);
});

it("the host profile: `auto` (or unset) is small-host on a machine of at most two cores and standard on a larger one; a profile named is taken whatever the machine", () => {
  expect(SMALL_HOST_CORES).toBe(2);
  for (const [cores, profile] of [
    [1, "small-host"],
    [2, "small-host"],
    [3, "standard"],
    [4, "standard"],
    [64, "standard"],
  ] as const) {
    expect(hostProfile({}, cores), `${cores} cores`).toBe(profile);
    expect(hostProfile({ RUNWAY_PROFILE: "auto" }, cores), `${cores} cores`).toBe(profile);
    expect(hostProfile({ RUNWAY_PROFILE: "small-host" }, cores)).toBe("small-host");
    expect(hostProfile({ RUNWAY_PROFILE: "standard" }, cores)).toBe("standard");
  }
  expect(hostProfile({ RUNWAY_PROFILE: "" }, 2)).toBe("small-host");
  expect(hostProfile({ RUNWAY_PROFILE: "tiny" }, 2)).toBeUndefined();
  expect(hostProfile({ RUNWAY_PROFILE: "Small-Host" }, 2)).toBeUndefined();
  expect(RUNWAY_PROFILE.refusal({ RUNWAY_PROFILE: "tiny" })).toBe('RUNWAY_PROFILE: "auto" or "small-host" or "standard", not "tiny"');
});

it("the helper threads follow the host profile when unset: lowered on a small host only; their own word wins over the profile", () => {
  expect(HELPER_THREADS.of({}, 2)).toBe("low");
  expect(HELPER_THREADS.of({}, 8)).toBe("normal");
  expect(HELPER_THREADS.of({ RUNWAY_PROFILE: "small-host" }, 64)).toBe("low");
  expect(HELPER_THREADS.of({ RUNWAY_PROFILE: "standard" }, 1)).toBe("normal");
  expect(HELPER_THREADS.of({ RUNWAY_HELPER_THREADS: "low" }, 64)).toBe("low");
  expect(HELPER_THREADS.of({ RUNWAY_HELPER_THREADS: "normal", RUNWAY_PROFILE: "small-host" }, 2)).toBe("normal");
  // A profile that is no setting is refused, whether the setting's own word is given or not.
  for (const env of [{ RUNWAY_PROFILE: "tiny" }, { RUNWAY_PROFILE: "tiny", RUNWAY_HELPER_THREADS: "normal" }]) {
    expect(HELPER_THREADS.of(env, 2)).toBeUndefined();
    expect(HELPER_THREADS.refusal(env)).toBe('RUNWAY_PROFILE: "auto" or "small-host" or "standard", not "tiny"');
  }
});

it("the event-loop spin assumes no machine: the same default under every profile and core count", () => {
  for (const cores of [1, 2, 64])
    for (const env of [{}, { RUNWAY_PROFILE: "small-host" }, { RUNWAY_PROFILE: "standard" }]) {
      expect(EVENT_LOOP_SPIN.of(env, cores)).toBe("on");
    }
});
