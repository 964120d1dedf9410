/**
 * `runway keys …`: the tenant's API keys, the bearer tokens of its HTTP callers (docs/a2a.md).
 *
 *   runway keys create <name> [--group G]... [--interactive]
 *   runway keys ls
 *   runway keys revoke <name>
 */
import type { RunwayClient } from "./client.js";
import { answered, UsageError, type Done } from "./cli-errors.js";

export const KEYS_OPTIONS = {
  group: { type: "string" as const, multiple: true as const },
  interactive: { type: "boolean" as const, default: false },
};

/** Checks `runway keys <sub> …` and answers what it does once connected. */
export function keysCommand(
  sub: string | undefined,
  positional: string | undefined,
  values: { group?: string[]; interactive?: boolean },
): (c: RunwayClient) => Promise<Done> {
  if (sub === "create") {
    if (!positional) throw new UsageError("keys create <name>: which name? (missing <name>)", "keys");
    const request = { name: positional, ...(values.group?.length ? { groups: values.group } : {}), ...(values.interactive ? { interactive: true } : {}) };
    return async (c) => answered("keys create", await c.createKey(request));
  }
  if (sub === "ls") return async (c) => answered("keys ls", await c.listKeys());
  if (sub === "revoke") {
    if (!positional) throw new UsageError("keys revoke <name>: which key? (missing <name>)", "keys");
    return async (c) => answered("keys revoke", await c.revokeKey(positional));
  }
  throw new UsageError(sub ? `unknown subcommand: keys ${sub} (create|ls|revoke)` : "which one? keys create|ls|revoke", "keys");
}
