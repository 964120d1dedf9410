import { availableParallelism } from "node:os";
import { envSetting, type EnvSetting } from "./env-setting.js";

/**
 * Which machine a node's tunings are for. One of them (V8's helper threads at a lower priority)
 * gains only where the event loop, nats-server and V8's helpers compete for the cores: on a
 * machine of {@link SMALL_HOST_CORES} cores or fewer. On a larger one the helpers have cores of
 * their own and the tuning only costs. docs/tuning.md says what each tuning costs and gains.
 */
export type HostProfile = "small-host" | "standard";

/** At most this many cores (`os.availableParallelism()`): `auto` picks `small-host`. */
export const SMALL_HOST_CORES = 2;

/**
 * `RUNWAY_PROFILE`: unset or `auto` picks the profile from the machine's cores; `small-host` or
 * `standard` picks it whatever the machine (the benchmarks pass `small-host`, the profile their
 * figures were measured with).
 */
export const RUNWAY_PROFILE = envSetting<"auto" | HostProfile>("RUNWAY_PROFILE", ["auto", "small-host", "standard"]);

/** The profile `env` picks on a machine of `cores` cores; undefined when `RUNWAY_PROFILE` is no setting. */
export function hostProfile(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): HostProfile | undefined {
  const setting = RUNWAY_PROFILE.of(env);
  if (setting !== "auto") return setting;
  return cores <= SMALL_HOST_CORES ? "small-host" : "standard";
}

/**
 * A setting whose unset (or empty) value is the host profile's word for it; a word of its own
 * is taken as written, whatever the profile. A `RUNWAY_PROFILE` that is no setting is refused
 * either way (a typo is said, not ignored).
 */
export function profiledSetting<T extends string>(variable: string, words: readonly [T, ...T[]], byProfile: Record<HostProfile, T>): EnvSetting<T> {
  const own = envSetting(variable, words);
  const unset = (env: NodeJS.ProcessEnv) => env[variable] === undefined || env[variable] === "";
  return {
    variable,
    of(env = process.env, cores?: number) {
      const profile = hostProfile(env, cores);
      if (!profile) return undefined;
      return unset(env) ? byProfile[profile] : own.of(env);
    },
    refusal(env = process.env) {
      return RUNWAY_PROFILE.of(env) ? own.refusal(env) : RUNWAY_PROFILE.refusal(env);
    },
  };
}
