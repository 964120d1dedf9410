/**
 * A setting a node reads from one environment variable: one of a few words, unset or empty
 * meaning the first. Any other word is no setting, and a node or a benchmark refuses to start on
 * it (saying why) rather than guess.
 */
export interface EnvSetting<T extends string> {
  readonly variable: string;
  /**
   * The word `env` sets; undefined for one not among the setting's words. `cores`: the machine's,
   * for a setting whose default follows the host profile (`host-profile.ts`; default: this machine's).
   */
  of(env?: NodeJS.ProcessEnv, cores?: number): T | undefined;
  /** Why `env`'s word is no setting: what a node or a benchmark that refuses to start says. */
  refusal(env?: NodeJS.ProcessEnv): string;
}

export function envSetting<T extends string>(variable: string, words: readonly [T, ...T[]]): EnvSetting<T> {
  return {
    variable,
    of(env = process.env) {
      const value = env[variable];
      if (value === undefined || value === "") return words[0];
      return words.find((w) => w === value);
    },
    refusal(env = process.env) {
      return `${variable}: ${words.map((w) => JSON.stringify(w)).join(" or ")}, not ${JSON.stringify(env[variable])}`;
    },
  };
}
