/**
 * `runway approvals …`: the reviewers' inbox.
 *
 *   runway approvals ls [--group G] [--run ID] [--limit N] [--cursor C]     runway approvals show <id>
 *   runway approvals approve <id> [--by NAME]     runway approvals reject <id> [--reason R] [--by NAME]
 *   runway approvals edit <id> --payload JSON [--by NAME]
 */
import type { ApiAnswer, RunwayClient } from "./client.js";

export const APPROVALS_USAGE = `  approvals ls [--group G] [--run ID] [--limit N] [--cursor C]  pending approvals, soonest deadline first, a page at a time
  approvals show <id> | approvals approve <id> | approvals reject <id> [--reason R] | approvals edit <id> --payload JSON   (--by NAME)`;

export class ApprovalsUsageError extends Error {}

export async function approvalsCommand(
  client: RunwayClient,
  sub: string | undefined,
  id: string | undefined,
  values: { group?: string; run?: string; reason?: string; payload?: string; by?: string; limit?: string; cursor?: string },
): Promise<{ print: ApiAnswer; failed?: boolean }> {
  if (sub === "ls") {
    const limit = values.limit === undefined ? undefined : Number(values.limit);
    if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) throw new ApprovalsUsageError(`--limit ${values.limit}: expected a positive integer`);
    const page = await client.approvals({
      ...(values.group ? { group: values.group } : {}),
      ...(values.run ? { run_id: values.run } : {}),
      ...(limit !== undefined ? { limit } : {}),
      ...(values.cursor ? { cursor: values.cursor } : {}),
    });
    return { print: page, failed: page.outcome !== "ok" };
  }
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
