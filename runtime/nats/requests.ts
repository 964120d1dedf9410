import { createInbox, type MsgHdrs, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { eventLoopSpin } from "../event-loop-spin.js";

/**
 * Request-reply on one shared inbox subscription per connection, with one coarse timer for all
 * deadlines. The client's own `request()` builds two Error objects (with stack traces) per
 * call, and on the actor hot path every transition makes two or three requests. Failures here
 * are plain outcomes, not exceptions.
 */
export type RawReply = { ok: true; msg: Msg } | { ok: false; reason: "timeout" | "no_responders" | "closed" | "too_large" };

interface Pending {
  resolve(reply: RawReply): void;
  sentAt: number;
  deadline: number;
}

/** `Promise.withResolvers` (Node 22), for Node 20. */
function withResolvers<T>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

class RequestMux {
  private readonly prefix: string;
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  private readonly sub: Subscription;
  private sweeper: NodeJS.Timeout | undefined;
  private readonly unregisterSpin: () => void;
  /** How long the last answer took: how soon the event loop may expect the next (event-loop-spin.ts). */
  private answerMs = 0;

  constructor(private readonly nc: NatsConnection) {
    this.prefix = `${createInbox()}.`;
    this.sub = nc.subscribe(`${this.prefix}*`, {
      callback: (err, msg) => {
        if (err) return;
        const token = Number(msg.subject.slice(this.prefix.length));
        const p = this.pending.get(token);
        if (!p) return;
        this.pending.delete(token);
        this.answerMs = performance.now() - p.sentAt;
        if (msg.data.length === 0 && msg.headers?.code === 503) p.resolve({ ok: false, reason: "no_responders" });
        else p.resolve({ ok: true, msg });
      },
    });
    this.unregisterSpin = eventLoopSpin.register(() => this.pending.size);
    void nc.closed().then(() => this.failAll("closed"));
  }

  /** Reserves a reply subject; the promise settles with the first message sent to it, or at the deadline. */
  expect(timeoutMs: number): { subject: string; reply: Promise<RawReply>; cancel(reason?: "closed" | "too_large"): void } {
    const token = this.reserve(timeoutMs);
    return { subject: `${this.prefix}${token.id}`, reply: token.reply, cancel: (reason = "closed") => this.settle(token.id, { ok: false, reason }) };
  }

  request(subject: string, data: Uint8Array | string, headers: MsgHdrs | undefined, timeoutMs: number): Promise<RawReply> {
    const token = this.reserve(timeoutMs);
    try {
      this.nc.publish(subject, data, { reply: `${this.prefix}${token.id}`, ...(headers ? { headers } : {}) });
    } catch (err) {
      // The client refuses a message over the server's max_payload before sending it: a local
      // refusal, not a closed connection (retrying it cannot help).
      this.settle(token.id, { ok: false, reason: /max_payload/i.test(String((err as Error)?.message ?? err)) ? "too_large" : "closed" });
    }
    return token.reply;
  }

  /** A reply token and the promise its first message (or its deadline) settles; no named closure per request (under tsx each costs a `__name` call). */
  private reserve(timeoutMs: number): { id: number; reply: Promise<RawReply> } {
    const id = this.next++;
    if (this.nc.isClosed()) return { id, reply: Promise.resolve({ ok: false, reason: "closed" }) };
    const { promise, resolve } = withResolvers<RawReply>();
    const now = performance.now();
    this.pending.set(id, { resolve, sentAt: now, deadline: now + timeoutMs });
    this.ensureSweeper();
    eventLoopSpin.expectAnswer(this.answerMs);
    return { id, reply: promise };
  }

  private settle(id: number, reply: RawReply): void {
    const p = this.pending.get(id);
    if (p && this.pending.delete(id)) p.resolve(reply);
  }

  private ensureSweeper(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => {
      const now = performance.now();
      for (const [token, p] of this.pending) {
        if (p.deadline <= now) {
          this.pending.delete(token);
          p.resolve({ ok: false, reason: "timeout" });
        }
      }
      if (this.pending.size === 0 && this.sweeper) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, 50);
    this.sweeper.unref();
  }

  private failAll(reason: "closed"): void {
    for (const p of this.pending.values()) p.resolve({ ok: false, reason });
    this.pending.clear();
    if (this.sweeper) clearInterval(this.sweeper);
    this.sub.unsubscribe();
    this.unregisterSpin();
  }
}

const muxes = new WeakMap<NatsConnection, RequestMux>();

function muxOf(nc: NatsConnection): RequestMux {
  let mux = muxes.get(nc);
  if (!mux) {
    mux = new RequestMux(nc);
    muxes.set(nc, mux);
  }
  return mux;
}

export function rawRequest(
  nc: NatsConnection,
  subject: string,
  data: Uint8Array | string,
  options: { headers?: MsgHdrs; timeoutMs?: number } = {},
): Promise<RawReply> {
  return muxOf(nc).request(subject, data, options.headers, options.timeoutMs ?? 2_000);
}

/** A reply subject to hand to someone else (e.g. an actor's `Rw-Reply`), and the reply when it comes. */
export function expectReply(nc: NatsConnection, timeoutMs: number): { subject: string; reply: Promise<RawReply>; cancel(): void } {
  return muxOf(nc).expect(timeoutMs);
}
