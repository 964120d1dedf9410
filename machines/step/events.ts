import { z } from "zod";
import { RetryPolicySchema } from "./retry.js";
import { STEP_OPS, type StepOp } from "./table.js";

const Ms = z.number().int().nonnegative();
const Counter = z.number().int().nonnegative();

export const StepErrorSchema = z.object({ code: z.string().min(1), message: z.string(), retryable: z.boolean() });
export type StepError = z.infer<typeof StepErrorSchema>;

/** The lease fence: the attempt and the lease epoch the lease holder was given. */
const Fence = { attempt: Counter, lease_epoch: Counter };

const OP_FIELDS = {
  ready: {},
  lease: {},
  start: Fence,
  succeed: Fence,
  fail: { ...Fence, error: StepErrorSchema, policy: RetryPolicySchema },
  skip: {},
  cancel: {},
} as const satisfies Record<StepOp, z.ZodRawShape>;

/** An op's own fields; nothing (not `Record<string, never>`) for an op that carries none. */
type Fields<K extends StepOp> = keyof (typeof OP_FIELDS)[K] extends never ? unknown : z.output<z.ZodObject<(typeof OP_FIELDS)[K]>>;

/** A step write, as {@link applyStepOp} takes it. */
export type StepOpEvent = { [K in StepOp]: { op: K; now: number } & Fields<K> }[StepOp];

function union<T>(key: string, build: (op: StepOp) => z.ZodObject): z.ZodType<T> {
  const members = STEP_OPS.map(build) as unknown as [z.ZodObject, z.ZodObject, ...z.ZodObject[]];
  return z.discriminatedUnion(key, members) as unknown as z.ZodType<T>;
}

/** Parsing fills the retry policy's defaults. */
export const StepOpEventSchema: z.ZodType<StepOpEvent> = union("op", (op) => z.object({ op: z.literal(op), now: Ms, ...OP_FIELDS[op] }));
