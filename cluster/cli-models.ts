/**
 * `runway models …`: the tenant's model providers.
 *
 *   runway models put <file.json> [--api-key-env VAR] | models list | models get <name> | models delete <name>
 *
 * A key may be in the file (`api_key`) or, better, read from the CLI's own environment with
 * `--api-key-env VAR`: then it is in no file and no shell history. No answer ever shows it.
 */
import type { RunwayClient } from "./client.js";
import { jsonFile } from "./cli-args.js";
import { answered, UsageError, type Done } from "./cli-errors.js";

/** What a checked `runway models` command does once connected. */
export type ModelsAction = (client: RunwayClient) => Promise<Done>;

function usage(message: string): UsageError {
  return new UsageError(message, "models");
}

/** Checks `runway models <sub> …` and answers what it does; a wrong command line, file or variable throws a UsageError. */
export function modelsCommand(sub: string | undefined, positionals: string[], values: { "api-key-env"?: string }, env: NodeJS.ProcessEnv): ModelsAction {
  const [arg] = positionals;
  if (sub === "put" && arg) {
    const provider = jsonFile("models", arg);
    if (typeof provider !== "object" || provider === null || Array.isArray(provider)) throw usage(`${arg}: a model provider is a JSON object`);
    const variable = values["api-key-env"];
    if (variable !== undefined) {
      if ("api_key" in provider) throw usage(`${arg} has an api_key and --api-key-env ${variable} gives one: which?`);
      // The variable's name only: its value is never quoted.
      const key = env[variable];
      if (!key) throw usage(`--api-key-env ${variable}: the variable is not set (or empty)`);
      (provider as Record<string, unknown>).api_key = key;
    }
    return async (client) => answered("models put", await client.putModelProvider(provider as Record<string, unknown>));
  }
  if (values["api-key-env"] !== undefined) throw usage("--api-key-env is for models put");
  if (sub === "list") return async (client) => answered("models list", await client.listModelProviders());
  if (sub === "get" && arg) return async (client) => answered("models get", await client.getModelProvider(arg));
  if (sub === "delete" && arg) return async (client) => answered("models delete", await client.deleteModelProvider(arg));
  throw usage(
    sub && !["put", "get", "delete"].includes(sub)
      ? `unknown subcommand: models ${sub} (models put <file.json> | list | get <name> | delete <name>)`
      : sub
        ? `models ${sub}: which ${sub === "put" ? "file" : "provider"}?`
        : "which one? models put <file.json> | list | get <name> | delete <name>",
  );
}
