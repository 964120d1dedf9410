import type { ActorAddress, ActorTypes } from "./define.js";
import type { CommandAnswer } from "./wire.js";

/** The command of `type` K of a protocol. */
export type CommandOf<T extends ActorTypes, K extends T["commands"]["type"]> = Extract<T["commands"], { type: K }>;

/** The value command `K` of protocol `T` answers with. */
export type AnswerTo<T extends ActorTypes, K extends string> = K extends keyof T["answers"] ? T["answers"][K] : unknown;

/** A command's answer with its value typed: `applied` carries what the machine answered (absent when it answered nothing). */
export type Answered<V> = Exclude<CommandAnswer, { outcome: "applied" }> | { outcome: "applied"; revision: number; value?: V };

/** {@link Answered}, or what a requester saw when no answer came. */
export type Asked<V> = Answered<V> | { outcome: "timeout" } | { outcome: "not_stored"; detail: string };

/** {@link Answered}, or why a command dispatched in this process was not applied here. */
export type Dispatched<V> = Answered<V> | { outcome: "not_served" } | { outcome: "kept"; reason: string };

/** `A` (an answer as the wire or the host gives it) with an `applied` answer's value typed `V`. */
export type WithValue<A, V> = A extends { outcome: "applied" } ? { outcome: "applied"; revision: number; value?: V } : A;

/**
 * The answer of command `K` read as protocol `T` says. The one place an answer's value gets its
 * type: the value is the machine's own `runway.answer`, passed through untouched (see
 * {@link ActorTypes}), so this is a type, not a conversion, and costs nothing.
 */
export function answerOf<T extends ActorTypes, K extends string, A extends { outcome: string }>(answer: A): WithValue<A, AnswerTo<T, K>>;
export function answerOf(answer: { outcome: string }): unknown {
  return answer;
}

/** Receives one `runway.local` channel's payloads in this process (`from`: the actor whose transition handed it over). */
export type LocalReceiver<P = never> = (payload: P, from: ActorAddress) => void;

/**
 * The receivers of a kind's `runway.local` channels, typed by its channel map (channel name →
 * payload type), so what a machine hands over and what the node receives agree at compile time.
 * The host passes each payload through untouched.
 */
export type LocalReceivers<M> = { [C in keyof M]: LocalReceiver<M[C]> };
