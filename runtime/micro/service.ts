/**
 * The NATS micro service protocol (ADR-32, rev. 6) on a nats.js v3 connection, so `nats micro
 * ls|info|stats|ping` see Runway's services (`@nats-io/services` only exists as a prerelease pinning
 * an old core). Control subjects are answered by every instance; endpoints share requests in a queue
 * group.
 */
import { nuid, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { sentHeaders } from "../nats/headers.js";

export const SERVICE_ERROR_HEADER = "Nats-Service-Error";
export const SERVICE_ERROR_CODE_HEADER = "Nats-Service-Error-Code";

const NAME = /^[A-Za-z0-9_-]+$/;
// semver.org's regular expression
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

export interface ServiceInfo {
  /** `[A-Za-z0-9_-]+`; shared by all instances of the service. */
  name: string;
  /** SemVer. */
  version: string;
  description?: string;
  metadata?: Record<string, string>;
}

export interface MicroRequest {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers?: MsgHdrs;
  /** Answers the request (once; later answers are ignored). */
  respond(data: Uint8Array | string, headers?: MsgHdrs): void;
  /** Answers with `Nats-Service-Error` / `Nats-Service-Error-Code` headers; counts as an error. */
  respondError(code: number, description: string, data?: Uint8Array | string): void;
}

export interface EndpointSpec {
  /** May contain wildcards, e.g. `runway.v1.*.runs.start`. */
  subject: string;
  /** Queue group (default `q`). */
  queue?: string;
  metadata?: Record<string, string>;
  handler(request: MicroRequest): Promise<void> | void;
}

interface Endpoint {
  name: string;
  spec: EndpointSpec;
  queue: string;
  sub?: Subscription;
  numRequests: number;
  numErrors: number;
  lastError: string;
  /** Nanoseconds. */
  processingTime: number;
}

type Verb = "PING" | "INFO" | "STATS";

function bytes(data: Uint8Array | string | undefined): Uint8Array | string {
  return data ?? new Uint8Array(0);
}

export class MicroService {
  readonly id: string = nuid.next();
  readonly #nc: NatsConnection;
  readonly #info: ServiceInfo;
  readonly #endpoints = new Map<string, Endpoint>();
  readonly #control: Subscription[] = [];
  readonly #inFlight = new Set<Promise<void>>();
  #started: Date | undefined;
  #stopped = false;

  constructor(nc: NatsConnection, info: ServiceInfo) {
    if (!NAME.test(info.name)) throw new TypeError(`invalid service name "${info.name}": use only A-Z, a-z, 0-9, _ and -`);
    if (!SEMVER.test(info.version)) throw new TypeError(`invalid service version "${info.version}": must be SemVer (e.g. 1.0.0)`);
    this.#nc = nc;
    this.#info = { ...info, metadata: { ...info.metadata } };
  }

  get name(): string {
    return this.#info.name;
  }

  /** Adds an endpoint; after start() it is subscribed at once. */
  addEndpoint(name: string, spec: EndpointSpec): void {
    if (!NAME.test(name)) throw new TypeError(`invalid endpoint name "${name}": use only A-Z, a-z, 0-9, _ and -`);
    if (this.#endpoints.has(name)) throw new Error(`endpoint "${name}" already exists on service ${this.#info.name}`);
    if (!spec.subject || /\s/.test(spec.subject)) throw new TypeError(`invalid subject "${spec.subject}" for endpoint ${name}`);
    if (this.#stopped) throw new Error("service is stopped");
    const ep: Endpoint = { name, spec, queue: spec.queue ?? "q", numRequests: 0, numErrors: 0, lastError: "", processingTime: 0 };
    this.#endpoints.set(name, ep);
    if (this.#started) this.#subscribe(ep);
  }

  /** Subscribes the endpoints and the `$SRV` responders; resolves once the server has them. */
  async start(): Promise<void> {
    if (this.#started) throw new Error("service already started");
    if (this.#stopped) throw new Error("service is stopped");
    this.#started = new Date();
    for (const ep of this.#endpoints.values()) this.#subscribe(ep);
    for (const verb of ["PING", "INFO", "STATS"] as const) {
      for (const subject of [`$SRV.${verb}`, `$SRV.${verb}.${this.#info.name}`, `$SRV.${verb}.${this.#info.name}.${this.id}`]) {
        this.#control.push(
          this.#nc.subscribe(subject, {
            callback: (err, msg) => {
              if (!err) this.#answerControl(verb, msg);
            },
          }),
        );
      }
    }
    await this.#nc.flush();
  }

  /** Stops taking requests, lets queued ones and running handlers finish. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const subs = [...this.#control, ...[...this.#endpoints.values()].flatMap((ep) => (ep.sub ? [ep.sub] : []))];
    this.#control.length = 0;
    if (!this.#nc.isClosed()) await Promise.allSettled(subs.map((s) => s.drain()));
    await Promise.allSettled([...this.#inFlight]);
  }

  /** The `$SRV.PING` answer. */
  ping(): Record<string, unknown> {
    return { type: "io.nats.micro.v1.ping_response", ...this.#common() };
  }

  /** The `$SRV.INFO` answer. */
  info(): Record<string, unknown> {
    return {
      type: "io.nats.micro.v1.info_response",
      ...this.#common(),
      description: this.#info.description ?? "",
      endpoints: [...this.#endpoints.values()].map((ep) => ({
        name: ep.name,
        subject: ep.spec.subject,
        queue_group: ep.queue,
        metadata: { ...ep.spec.metadata },
      })),
    };
  }

  /** The `$SRV.STATS` answer; times in nanoseconds. */
  stats(): Record<string, unknown> {
    return {
      type: "io.nats.micro.v1.stats_response",
      ...this.#common(),
      started: (this.#started ?? new Date()).toISOString(),
      endpoints: [...this.#endpoints.values()].map((ep) => ({
        name: ep.name,
        subject: ep.spec.subject,
        queue_group: ep.queue,
        num_requests: ep.numRequests,
        num_errors: ep.numErrors,
        last_error: ep.lastError,
        processing_time: Math.round(ep.processingTime),
        average_processing_time: ep.numRequests === 0 ? 0 : Math.round(ep.processingTime / ep.numRequests),
      })),
    };
  }

  #common() {
    return { name: this.#info.name, id: this.id, version: this.#info.version, metadata: { ...this.#info.metadata } };
  }

  #answerControl(verb: Verb, msg: Msg): void {
    if (!msg.reply) return;
    const body = verb === "PING" ? this.ping() : verb === "INFO" ? this.info() : this.stats();
    try {
      msg.respond(JSON.stringify(body));
    } catch {
      // the connection is closing: nobody to answer
    }
  }

  #subscribe(ep: Endpoint): void {
    ep.sub = this.#nc.subscribe(ep.spec.subject, {
      queue: ep.queue,
      callback: (err, msg) => {
        if (!err) this.#dispatch(ep, msg);
      },
    });
  }

  #dispatch(ep: Endpoint, msg: Msg): void {
    if (!msg.reply) return; // a publish, not a request: there is nobody to answer
    const start = process.hrtime.bigint();
    let responded = false;
    let failed = false;
    const error = (code: number, description: string) => {
      failed = true;
      ep.lastError = `${code}:${description}`;
    };
    const send = (data: Uint8Array | string, hdrs?: MsgHdrs) => {
      if (responded) return;
      responded = true;
      try {
        msg.respond(data, hdrs ? { headers: hdrs } : undefined);
      } catch (err) {
        // A reply too large for the server is answered with a small error, not left to time out;
        // a closing connection cannot answer at all.
        const description = `reply not sent: ${err instanceof Error ? err.message : String(err)}`.replace(/[\r\n]+/g, " ").slice(0, 500);
        error(500, description);
        try {
          const h = sentHeaders();
          h.set(SERVICE_ERROR_HEADER, description);
          h.set(SERVICE_ERROR_CODE_HEADER, "500");
          msg.respond(new Uint8Array(0), { headers: h });
        } catch {
          // the connection is closing: the requester times out
        }
      }
    };
    const request: MicroRequest = {
      subject: msg.subject,
      data: msg.data,
      ...(msg.headers ? { headers: msg.headers } : {}),
      respond: (data, hdrs) => send(data, hdrs),
      respondError: (code, description, data) => {
        if (responded) return;
        const h = sentHeaders();
        h.set(SERVICE_ERROR_HEADER, description.replace(/[\r\n]+/g, " "));
        h.set(SERVICE_ERROR_CODE_HEADER, String(Math.trunc(code)));
        error(code, description);
        send(bytes(data), h);
      },
    };
    const finish = (thrown?: unknown) => {
      if (thrown !== undefined) {
        const message = thrown instanceof Error ? thrown.message : String(thrown);
        if (responded) error(500, message);
        else request.respondError(500, message || "internal error");
      }
      ep.numRequests++;
      if (failed) ep.numErrors++;
      ep.processingTime += Number(process.hrtime.bigint() - start);
    };
    let result: Promise<void> | void;
    try {
      result = ep.spec.handler(request);
    } catch (err) {
      return finish(err ?? "handler threw");
    }
    if (typeof (result as { then?: unknown } | undefined)?.then !== "function") return finish();
    const done = Promise.resolve(result).then(
      () => finish(),
      (err: unknown) => finish(err ?? "handler rejected"),
    );
    this.#inFlight.add(done);
    void done.finally(() => this.#inFlight.delete(done));
  }
}
