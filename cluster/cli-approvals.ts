/**
 * `runway approvals …`: the reviewers' inbox.
 *
 *   runway approvals ls [--group G] [--run ID]     runway approvals show <id>
 *   runway approvals approve <id> [--by NAME]     runway approvals reject <id> [--reason R] [--by NAME]
 *   runway approvals edit <id> --payload JSON [--by NAME]
 */
import type { ApiAnswer, RunwayClient } from "./client.js";

export const APPROVALS_USAGE = `  approvals ls [--group G] [--run ID]                           pending approvals, soonest deadline first
  approvals show <id> | approvals approve <id> | approvals reject <id> [--reason R] | approvals edit <id> --payload JSON   (--by NAME)`;

export class ApprovalsUsageError extends Error {}

export async function approvalsCommand(
  client: RunwayClient,
  sub: string | undefined,
  id: string | undefined,
  values: { group?: string; run?: string; reason?: string; payload?: string; by?: string },
): Promise<{ print: ApiAnswer; failed?: boolean }> {
  if (sub === "ls")
    return { print: await client.approvals({ ...(values.group ? { group: values.group } : {}), ...(values.run ? { run_id: values.run } : {}) }) };
  if (!id) throw new ApprovalsUsageError("approvals show|approve|reject|edit <id>");
  if (sub === "show") {
    const got = await client.approval(id);
    return { print: got, failed: got.outcome !== "found" };
  }
  if (sub !== "approve" && sub !== "reject" && sub !== "edit") throw new ApprovalsUsageError("approvals ls|show|approve|reject|edit");
  let payload: unknown;
  if (sub === "edit") {
    if (values.payload === undefined) throw new ApprovalsUsageError("approvals edit <id> --payload JSON");
    try {
      payload = JSON.parse(values.payload);
    } catch {
      throw new ApprovalsUsageError(`--payload ${values.payload}: not JSON`);
    }
  }
  const decided = await client.decide(id, sub, {
    ...(payload !== undefined ? { payload } : {}),
    ...(values.reason ? { reason: values.reason } : {}),
    by: values.by ?? process.env.USER ?? "cli",
  });
  return { print: decided, failed: decided.outcome !== "decided" };
}
