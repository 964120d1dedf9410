/**
 * Typed faults of the runtime. Business answers (conflict, fenced, refused) are closed result
 * unions, never exceptions; these classes are for faults only. A fault says whether retrying
 * can help (`kind`), and it is recognised by a brand, not by `instanceof`, so that it survives
 * a trip across a worker thread or a process as plain data.
 */
export type FaultKind = "terminal" | "retryable" | "cancelled";

const BRAND = "runway.fault" as const;

export class RunwayFault extends Error {
  readonly brand = BRAND;
  readonly code: string;
  readonly kind: FaultKind;

  constructor(code: string, message: string, options: { kind?: FaultKind; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "RunwayFault";
    this.code = code;
    this.kind = options.kind ?? "terminal";
  }

  get retryable(): boolean {
    return this.kind === "retryable";
  }

  toJSON(): SerializedFault {
    return { brand: BRAND, code: this.code, kind: this.kind, message: this.message };
  }
}

export interface SerializedFault {
  brand: typeof BRAND;
  code: string;
  kind: FaultKind;
  message: string;
}

export function isFault(value: unknown): value is RunwayFault | SerializedFault {
  return typeof value === "object" && value !== null && (value as { brand?: unknown }).brand === BRAND;
}

export function faultFrom(serialized: SerializedFault): RunwayFault {
  return new RunwayFault(serialized.code, serialized.message, { kind: serialized.kind });
}

/** The store did not answer in time or is electing a leader; the operation may be retried. */
export class StoreUnavailable extends RunwayFault {
  constructor(message: string, cause?: unknown) {
    super("store_unavailable", message, { kind: "retryable", cause });
    this.name = "StoreUnavailable";
  }
}

/** The server is too old or misconfigured for the guarantees Runway makes. */
export class UnsupportedServer extends RunwayFault {
  constructor(message: string) {
    super("unsupported_server", message);
    this.name = "UnsupportedServer";
  }
}
