/**
 * The `a2a` node: one call of a remote A2A 1.0 agent, `{kind: "a2a", agent: "<card URL>",
 * message, auth?}`. It compiles to a code step whose call goes through the tool journal (intent,
 * call, task, receipt) under the reserved server `a2a:<auth>` (a colon: no registered server can
 * have that name) and the tool `<card URL>`; `message` (a template) is its input. The remote
 * agent is reached by the node (gateways/a2a/client.ts), never by a pool worker.
 */
import { z } from "zod";
import { isJson, type Json } from "./canonical.js";

/** The prefix of the tool-journal server an `a2a` node's call goes to; what follows is its `auth` name (may be empty). */
export const A2A_SERVER_PREFIX = "a2a:";
/** A card URL is kept as the call's tool name: at most this long. */
export const MAX_AGENT_URL = 190;

/**
 * A call of a remote agent. `message`: a template (a string becomes a text part, any other value
 * one data part). `auth`: the name of a bearer credential the node holds for this tenant (never
 * the token itself: see docs/a2a.md#calling-remote-agents). `timeout_ms`: how long the send
 * itself may take (the remote task then runs as long as it needs).
 */
export type A2ANode = {
  id: string;
  needs?: (string | { node: string; when: "succeeded" | "failed" | "always" })[];
  continue_on_error?: boolean;
  kind: "a2a";
  agent: string;
  message: Json;
  auth?: string;
  retry?: { max_attempts: number; backoff_ms: number; max_backoff_ms: number; multiplier?: number };
  timeout_ms?: number;
};

/** A credential's name: what the node's credentials map keys under the tenant. */
export const A2AAuthNameSchema = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "an auth name is 1-64 letters, digits, '_', '.' or '-'");

/** An agent card URL: http(s), no credentials in it, at most {@link MAX_AGENT_URL} characters. */
export const AgentUrlSchema = z
  .url({ protocol: /^https?$/, error: "agent is the http(s) URL of the agent's card" })
  .max(MAX_AGENT_URL, `agent is at most ${MAX_AGENT_URL} characters`)
  .refine((u) => !/^https?:\/\/[^/]*@/.test(u), { message: "agent must not carry credentials: name them with auth" });

/** The fields of an `a2a` node besides the common ones (definition.ts adds those and the strictness). */
export const a2aNodeShape = {
  kind: z.literal("a2a"),
  agent: AgentUrlSchema,
  message: z.custom<Json>((v) => isJson(v) && v !== null, "message is a JSON value (a template), not null"),
  auth: A2AAuthNameSchema.optional(),
};

/** What the plan's code step of an `a2a` node holds besides its base, retry and timeout: a call through the tool journal. */
export function a2aStep(n: A2ANode): { handler: string; input: Json; tool: { server: string; tool: string } } {
  return { handler: `a2a:${n.agent}`, input: n.message, tool: { server: `${A2A_SERVER_PREFIX}${n.auth ?? ""}`, tool: n.agent } };
}

/** Whether a tool-journal server is an `a2a` node's (and its auth name when so). */
export function a2aAuthOf(server: string): { auth: string | undefined } | undefined {
  if (!server.startsWith(A2A_SERVER_PREFIX)) return undefined;
  const auth = server.slice(A2A_SERVER_PREFIX.length);
  return { auth: auth === "" ? undefined : auth };
}
