import type { NatsConnection } from "@nats-io/transport-node";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { LEASE_LAPSED, nestingDepth, type ExecuteRequest } from "../../machines/index.js";
import { jsonBytes, type StepResult } from "../../runtime/index.js";
import { interruptedError, type BoundedRef } from "../run/index.js";

/** The object store of step results over the inline bound, kept by reference. */
export const RESULTS_STORE = "rw-results";

/** Outputs nesting deeper than this fail `bad_output`: a run record (with its own levels around it) must stay encodable. */
export const MAX_OUTPUT_DEPTH = 256;

/** Results above this are stored in the object store and recorded by reference. */
export const RESULT_INLINE_LIMIT = 32 * 1024;

/** A handler's error message is cut to this many characters: a run record keeps it, and must stay storable. */
export const MAX_ERROR_MESSAGE = 4 * 1024;

type StepError = { code: string; message: string; retryable: boolean };

/** The `step.result` an attempt reports: its fence and how it ended. */
function resultOf(
  request: ExecuteRequest,
  ended: { outcome: "succeeded"; output: unknown } | { outcome: "failed"; error: StepError },
): Record<string, unknown> {
  return { type: "step.result", node: request.node, attempt: request.attempt, lease_epoch: request.lease_epoch, ...ended };
}

/** The report of an attempt stopped for want of its run's partition: a platform failure, retried at once wherever the run still wants it. */
export function lapsedResult(request: ExecuteRequest): Record<string, unknown> {
  return resultOf(request, {
    outcome: "failed",
    error: { code: LEASE_LAPSED, message: "this node no longer surely held the run's partition", retryable: true },
  });
}

/** The report of an attempt that ended with nothing its run took (a write of its journal refused): a platform failure, retried at once if its run still wants it. */
export function interruptedResult(request: ExecuteRequest): Record<string, unknown> {
  return resultOf(request, { outcome: "failed", error: interruptedError() });
}

/** A failure the attempt reports whatever its handler made of it (a gated call a map item cannot wait for). */
export function failedResult(request: ExecuteRequest, error: StepError): Record<string, unknown> {
  return resultOf(request, { outcome: "failed", error });
}

/** What a handler's pool result becomes in its run: its output kept within the bound, a message cut to size, a value too deep refused. */
export async function handlerResult(request: ExecuteRequest, result: StepResult, bounds: ResultBounds): Promise<Record<string, unknown>> {
  if (result.outcome === "succeeded" && nestingDepth(result.output, MAX_OUTPUT_DEPTH) > MAX_OUTPUT_DEPTH)
    // A run could never store it (records refuse deep values): the handler's own bug, not worth a retry.
    return failedResult(request, { code: "bad_output", message: `the output nests deeper than ${MAX_OUTPUT_DEPTH} levels`, retryable: false });
  if (result.outcome === "succeeded") return resultOf(request, { outcome: "succeeded", output: await bounds.bounded(request, result.output) });
  const error =
    result.error.message.length > MAX_ERROR_MESSAGE ? { ...result.error, message: `${result.error.message.slice(0, MAX_ERROR_MESSAGE)}…` } : result.error;
  return failedResult(request, error);
}

/** Keeps results within the inline bound; a larger one goes to the object store by reference. */
export class ResultBounds {
  private objects: Promise<ObjectStore> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  async bounded(request: BoundedRef, output: unknown): Promise<unknown> {
    // Measured without building the JSON: only a result past the bound is serialised (for the object store).
    if (jsonBytes(output ?? null) <= RESULT_INLINE_LIMIT) return output ?? null;
    const text = JSON.stringify(output ?? null);
    this.objects ??= new Objm(this.nc).open(RESULTS_STORE);
    const name = `${request.run}/${request.node}/${request.item ?? "-"}/${request.attempt}`;
    const info = await (await this.objects).putBlob({ name }, new TextEncoder().encode(text));
    return { $ref: `${RESULTS_STORE}/${name}`, bytes: info.size, digest: info.digest };
  }
}
