/**
 * `runway approvals …`: the reviewers' inbox, every kind of item the API answers (approval node,
 * gated tool call, a server's input request, a run waiting to be admitted). Usage: cli-help.ts.
 */
import type { RunwayClient } from "./client.js";
import { jsonFile, jsonFlag, positiveInt } from "./cli-args.js";
import { answered, UsageError, type Done } from "./cli-errors.js";

/** The options `runway approvals` accepts (beside the connection's). */
export const APPROVALS_OPTIONS = {
  group: { type: "string" },
  run: { type: "string" },
  reason: { type: "string" },
  payload: { type: "string" },
  "payload-file": { type: "string" },
  by: { type: "string" },
  limit: { type: "string" },
  cursor: { type: "string" },
} as const;

type ApprovalsValues = { [K in keyof typeof APPROVALS_OPTIONS]?: string };

/** What a checked `runway approvals` command does once connected. */
export type ApprovalsAction = (client: RunwayClient) => Promise<Done>;

/** A tool server's request for a person's input: `<run>:<node>:input.<server>/<tool>.<round>` (what the API recognises too). */
const INPUT_REQUEST = /^[^:]+:[^:]+:input\./;

function usage(message: string): UsageError {
  return new UsageError(message, "approvals");
}

/** The payload of a decision: `--payload JSON` or `--payload-file FILE`, not both; undefined when neither is given. */
function payloadOf(values: ApprovalsValues): unknown {
  if (values.payload !== undefined && values["payload-file"] !== undefined) throw usage("--payload and --payload-file: one or the other");
  if (values["payload-file"] !== undefined) return jsonFile("approvals", values["payload-file"]);
  if (values.payload !== undefined) return jsonFlag("approvals", "--payload", values.payload);
  return undefined;
}

/** Checks `runway approvals <sub> …` and answers what it does; a wrong command line throws a UsageError. */
export function approvalsCommand(sub: string | undefined, id: string | undefined, values: ApprovalsValues): ApprovalsAction {
  if (sub === "ls") {
    const limit = positiveInt("approvals", "--limit", values.limit);
    const filter = {
      ...(values.group ? { group: values.group } : {}),
      ...(values.run ? { run_id: values.run } : {}),
      ...(limit !== undefined ? { limit } : {}),
      ...(values.cursor ? { cursor: values.cursor } : {}),
    };
    return async (client) => answered("approvals ls", await client.approvals(filter));
  }
  if (sub !== "show" && sub !== "approve" && sub !== "reject" && sub !== "edit")
    throw usage(sub ? `unknown subcommand: approvals ${sub} (ls|show|approve|reject|edit)` : "which one? approvals ls|show|approve|reject|edit");
  if (!id) throw usage(`approvals ${sub} <id>: which item? (missing <id>; approvals ls lists them)`);
  if (sub === "show") return async (client) => answered("approvals show", await client.approval(id));
  // Approve: an input item's form content (the API checks it against the server's schema), else nothing. Edit: what the run goes on with.
  const payload = sub === "reject" ? undefined : payloadOf(values);
  if (sub === "edit" && payload === undefined) throw usage("approvals edit <id> --payload JSON: the payload the run goes on with");
  if (sub === "approve" && payload !== undefined && !INPUT_REQUEST.test(id))
    throw usage(`approvals approve ${id} --payload: only a request for input is approved with content; edit changes another item's payload`);
  if (sub === "reject" && (values.payload !== undefined || values["payload-file"] !== undefined))
    throw usage("approvals reject carries no payload (--reason R says why)");
  const decision = {
    ...(payload !== undefined ? { payload } : {}),
    ...(values.reason ? { reason: values.reason } : {}),
    by: values.by ?? process.env.USER ?? "cli",
  };
  return async (client) => answered(`approvals ${sub}`, await client.decide(id, sub, decision));
}
