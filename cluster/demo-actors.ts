import { assign, emit, setup } from "xstate";
import { z } from "zod";
import { defineActor } from "../runtime/index.js";

/** The runtime demo's actor: an account that counts deposits. */
const Deposit = z.object({ type: z.literal("deposit"), amount: z.number().int().positive() });

const account = setup({ types: { context: {} as { balance: number; deposits: number }, events: {} as z.infer<typeof Deposit> & { now: number } } }).createMachine({
  id: "account",
  context: { balance: 0, deposits: 0 },
  on: {
    deposit: {
      actions: [
        assign({ balance: ({ context, event }) => context.balance + event.amount, deposits: ({ context }) => context.deposits + 1 }),
        emit(({ context }) => ({ type: "runway.answer" as const, value: { balance: context.balance } })),
      ],
    },
  },
});

export const actors = [defineActor({ kind: "account", machine: account, events: Deposit })];
