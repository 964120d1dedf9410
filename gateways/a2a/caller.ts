import type { ServerCallContext } from "@a2a-js/sdk/server";
import { UnsupportedOperationError } from "@a2a-js/sdk/errors";
import type { TraceContext } from "../../machines/index.js";

/**
 * Who calls, for one request: the A2A SDK's `User`, with the request's lifetime (its connection
 * closing aborts what waits for it). An authenticated caller is an API key: `name` is its identity
 * (`key:<tenant>/<name>`), with the reviewer groups and the lane the key grants.
 */
export class Caller {
  constructor(
    readonly signal: AbortSignal,
    readonly name: string = "anonymous",
    readonly authenticated = false,
    readonly groups: readonly string[] = [],
    readonly interactive = false,
  ) {}
  /** The request's W3C `traceparent` (HTTP header), when valid: a run this request starts has its root span as that span's child. */
  trace: TraceContext | undefined;
  get isAuthenticated(): boolean {
    return this.authenticated;
  }
  get userName(): string {
    return this.name;
  }
  /** What the run journals as the decider or canceller: the key's identity, or `a2a:anonymous` for a public agent's caller. */
  get by(): string {
    return this.authenticated ? this.name : `a2a:${this.name}`;
  }
}

/** A decision the caller may not make: answered as `UnsupportedOperation` whose message and metadata say `not_authorized`. */
export function notAuthorized(why: string): Error {
  return new UnsupportedOperationError({ message: `not_authorized: ${why}`, metadata: { outcome: "not_authorized" } });
}

const NEVER = new AbortController().signal;

/** The request's caller (the SDK hands the `User` the server built), or an anonymous one that never goes. */
export function callerOf(context: ServerCallContext): Caller {
  const user = context.user;
  return user instanceof Caller ? user : new Caller(NEVER);
}
