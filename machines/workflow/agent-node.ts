/**
 * The `agent` node: a model loop with tools. Its definition shape, its plan form (a `code` plan
 * node carrying `agent`, as a tool node carries `tool`, so every attempt, lease, retry and fence
 * rule of a step applies unchanged) and its publish checks. The plan pins the model and the tool
 * list: both are part of the plan's canonical JSON, so of the published version's digest.
 *
 * definition.ts, plan.ts and expand.ts build on this module (its fields, its schema, its plan
 * field), so it imports neither of them.
 */
import { z } from "zod";
import { isJson } from "./canonical.js";
import { checkSchemaSubset, type SchemaIssue } from "./json-schema.js";
import type { Json } from "./canonical.js";

/** Turns an agent may take when its node names no `max_turns`. */
export const DEFAULT_AGENT_TURNS = 10;
/** Tool calls an agent may make when its node names no `max_tool_calls`. */
export const DEFAULT_AGENT_TOOL_CALLS = 50;
/** How long one attempt of an agent node may run when it names no `timeout_ms` (the whole loop). */
export const DEFAULT_AGENT_TIMEOUT_MS = 5 * 60_000;

/**
 * `{kind: "agent", model: "<provider>/<model>", instructions, input?, tools?, agents?, max_turns?,
 * max_tool_calls?, max_tokens?, output_schema?}`. `input` (a template, resolved when the node
 * starts) is the task: the first user message (a string as is, anything else as JSON). `tools`
 * names the tenant's MCP tools the model may call (`server/tool`); `agents` the published
 * definitions it may delegate to, each a child run (pinned at publish like a subworkflow, its
 * tools a subset of this node's). The ceilings are the node's:
 * `max_turns` model turns, `max_tool_calls` calls, `max_tokens` input plus output tokens over all
 * turns (a remainder of zero never calls the model). `output_schema` (the workflow schema subset)
 * checks the final answer, parsed as JSON: one repair turn, then `invalid_output`.
 */
export type AgentFields = {
  kind: "agent";
  model: string;
  instructions: string;
  input?: Json;
  tools?: string[];
  agents?: string[];
  max_turns?: number;
  max_tool_calls?: number;
  max_tokens?: number;
  output_schema?: { [key: string]: Json };
};

/** What a plan keeps of an agent node (and an attempt's `ExecuteRequest` carries): its defaults filled in. */
export type PlanAgent = {
  model: string;
  instructions: string;
  tools: string[];
  /** Published definitions the model may delegate to (each offered as the tool `agent__<name>`); absent: none. */
  agents?: string[];
  max_turns: number;
  max_tool_calls: number;
  max_tokens?: number;
  output_schema?: Json;
};

const ModelRef = z.string().regex(/^[A-Za-z0-9_-]{1,64}\/[A-Za-z0-9_.:\/-]{1,128}$/, "a model is provider/model");
const AgentTool = z.string().regex(/^[A-Za-z0-9_-]{1,64}\/[^/\s*]{1,128}$/, "an agent's tool is server/tool");

/** The node's zod object, built by definition.ts from its shared fields (id, needs, retry…). */
export function agentNodeObject<C extends z.ZodRawShape, R>(common: C, retry: z.ZodType<R>, json: z.ZodType<Json>, timeout: z.ZodType<number>) {
  return z.strictObject({
    ...common,
    kind: z.literal("agent"),
    model: ModelRef,
    instructions: z.string().min(1).max(100_000),
    input: json.optional(),
    tools: z
      .array(AgentTool)
      .max(128)
      .refine((t) => new Set(t).size === t.length, "an agent's tools are listed once each")
      .optional(),
    agents: z
      .array(z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a subagent is a published definition's name"))
      .max(32)
      .refine((a) => new Set(a).size === a.length, "an agent's subagents are listed once each")
      .optional(),
    max_turns: z.number().int().min(1).max(1_000).optional(),
    max_tool_calls: z.number().int().min(0).max(10_000).optional(),
    max_tokens: z.number().int().min(1).max(1e9).optional(),
    output_schema: z.record(z.string(), json).optional(),
    retry: retry.optional(),
    timeout_ms: timeout.optional(),
  });
}

/** The plan's `agent` field of an agent node: its defaults filled in. */
export function planAgentOf(n: AgentFields): PlanAgent {
  return {
    model: n.model,
    instructions: n.instructions,
    tools: n.tools ?? [],
    ...(n.agents?.length ? { agents: n.agents } : {}),
    max_turns: n.max_turns ?? DEFAULT_AGENT_TURNS,
    max_tool_calls: n.max_tool_calls ?? DEFAULT_AGENT_TOOL_CALLS,
    ...(n.max_tokens !== undefined && { max_tokens: n.max_tokens }),
    ...(n.output_schema !== undefined && { output_schema: n.output_schema }),
  };
}

/** Publish checks beyond shape: the output schema is within the supported subset. */
export function checkAgentNode(n: AgentFields, path: readonly (string | number)[]): SchemaIssue[] {
  return n.output_schema !== undefined ? checkSchemaSubset(n.output_schema, [...path, "output_schema"]) : [];
}

/** The plan's agent field, as plan.ts validates a stored plan. */
export const PlanAgentSchema = z.strictObject({
  model: z.string(),
  instructions: z.string(),
  tools: z.array(z.string()),
  agents: z.array(z.string()).optional(),
  max_turns: z.number().int().positive(),
  max_tool_calls: z.number().int().nonnegative(),
  max_tokens: z.number().int().positive().optional(),
  output_schema: z.custom<Json>((v) => isJson(v), "expected a JSON value").optional(),
});
