/**
 * The pool's start-up probe: every thread loads the handler modules and names the handlers it
 * found. A thread that answers anything else, or names other handlers than the rest, fails the
 * start (every thread must be able to run every step).
 */
import type { Piscina } from "piscina";
import { WIRE_VERSION, isWire, type InitMessage, type ReadyMessage } from "./wire.js";

/** The handlers every one of `threads` threads names, sorted; rejects past `timeoutMs` or on a disagreement. */
export async function probeThreads(piscina: Piscina, threads: number, timeoutMs: number): Promise<string[]> {
  const signal = AbortSignal.timeout(timeoutMs);
  const init: InitMessage = { t: "init", v: WIRE_VERSION };
  const replies = await Promise.all(Array.from({ length: threads }, () => piscina.run(init, { signal }) as Promise<unknown>));
  let names: string[] | undefined;
  for (const reply of replies) {
    if (!isWire<ReadyMessage>(reply, "ready")) throw new Error(`unexpected worker reply ${JSON.stringify(reply)}`);
    const seen = [...reply.handlers].sort();
    names ??= seen;
    if (seen.join("\n") !== names.join("\n")) throw new Error(`workers see different handlers: ${names.join(", ")} and ${seen.join(", ")}`);
  }
  return names ?? [];
}
