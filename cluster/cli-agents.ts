/**
 * `runway agents …`: which of the tenant's published definitions are A2A agents (docs/a2a.md).
 *
 *   runway agents expose <definition> [--name N] [--description D] [--skills-file F] [--public]
 *   runway agents ls
 *   runway agents hide <name>
 */
import type { RunwayClient } from "./client.js";
import { jsonFile } from "./cli-args.js";
import { answered, UsageError, type Done } from "./cli-errors.js";

export const AGENTS_OPTIONS = {
  name: { type: "string" as const },
  description: { type: "string" as const },
  "skills-file": { type: "string" as const },
  public: { type: "boolean" as const, default: false },
};

/** Checks `runway agents <sub> …` and answers what it does once connected. */
export function agentsCommand(
  sub: string | undefined,
  positional: string | undefined,
  values: { name?: string; description?: string; "skills-file"?: string; public?: boolean },
): (c: RunwayClient) => Promise<Done> {
  if (sub === "expose") {
    if (!positional) throw new UsageError("agents expose <definition>: which definition? (missing <definition>)", "agents");
    const skills = values["skills-file"] === undefined ? undefined : jsonFile("agents", values["skills-file"]);
    if (skills !== undefined && !Array.isArray(skills)) throw new UsageError("--skills-file: a JSON array of skills", "agents");
    const request = {
      definition: positional,
      ...(values.name !== undefined ? { name: values.name } : {}),
      ...(values.description !== undefined ? { description: values.description } : {}),
      ...(skills !== undefined ? { skills: skills as never } : {}),
      public: values.public === true,
    };
    return async (c) => answered("agents expose", await c.exposeAgent(request));
  }
  if (sub === "ls") return async (c) => answered("agents ls", await c.listAgents());
  if (sub === "hide") {
    if (!positional) throw new UsageError("agents hide <name>: which agent? (missing <name>)", "agents");
    return async (c) => answered("agents hide", await c.hideAgent(positional));
  }
  throw new UsageError(sub ? `unknown subcommand: agents ${sub} (expose|ls|hide)` : "which one? agents expose|ls|hide", "agents");
}
