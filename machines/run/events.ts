import { z } from "zod";
import { RUN_OPS, WAITING_ON, type RunOp } from "./table.js";

/** Wall-clock milliseconds, as the host stamps them on every event. */
const Ms = z.number().int().nonnegative();

/** Fields each op carries besides `op`/`type` and `now`. */
const OP_FIELDS = {
  admit: {},
  claim: {},
  mark_waiting: {
    on: z.enum(WAITING_ON),
    /** The approval or wait node waited on; null when the wait points at no row (a delay). */
    ref: z.string().min(1).nullable(),
    /** When the wait dies; required, because a wait without a deadline can park for ever. */
    expires_at: Ms,
  },
  advance: {},
  resume: {},
  succeed: {},
  fail: {},
  cancel: {},
} as const satisfies Record<RunOp, z.ZodRawShape>;

/** An op's own fields; nothing (not `Record<string, never>`) for an op that carries none. */
type Fields<K extends RunOp> = keyof (typeof OP_FIELDS)[K] extends never ? unknown : z.output<z.ZodObject<(typeof OP_FIELDS)[K]>>;

/** A lifecycle write, as {@link applyRunOp} takes it. */
export type RunOpEvent = { [K in RunOp]: { op: K; now: number } & Fields<K> }[RunOp];

function union<T>(key: string, build: (op: RunOp) => z.ZodObject): z.ZodType<T> {
  const members = RUN_OPS.map(build) as unknown as [z.ZodObject, z.ZodObject, ...z.ZodObject[]];
  return z.discriminatedUnion(key, members) as unknown as z.ZodType<T>;
}

export const RunOpEventSchema: z.ZodType<RunOpEvent> = union("op", (op) => z.object({ op: z.literal(op), now: Ms, ...OP_FIELDS[op] }));
