// The typed actor protocol (issue 37 §1): a command's answer is typed by the kind's declared
// protocol, at no cost per command (the answer object is handed over as it came).
import { describe, expect, expectTypeOf, it } from "vitest";
import { answerOf, type Asked, type MailboxClient } from "../../runtime/index.js";
import { RunHandles } from "../../gateways/api/run-handles.js";
import type { RunTypes } from "../../actors/run/protocol.js";

/** A mailbox that answers every request with `answer` and remembers what it was asked. */
function mailboxAnswering(answer: Asked<unknown>) {
  const asked: { address: unknown; event: unknown; id: string }[] = [];
  const mailbox = {
    request: (address: unknown, event: unknown, id: string) => (asked.push({ address, event, id }), Promise.resolve(answer)),
  } as unknown as MailboxClient;
  return { mailbox, asked };
}

describe("typed actor protocol", () => {
  it("runs.of(id).cancel(…) sends run.cancel to the run and answers the union the run declares for it, the same object", async () => {
    const value = { outcome: "cancel_requested", run: { id: "r1" } };
    const answer = { outcome: "applied" as const, revision: 4, value };
    const { mailbox, asked } = mailboxAnswering(answer);
    const got = await new RunHandles({ mailbox }).of("r1").cancel("enough", "ops", "cancel/r1/1");
    expect(asked).toEqual([{ address: { kind: "run", id: "r1" }, event: { type: "run.cancel", reason: "enough", by: "ops" }, id: "cancel/r1/1" }]);
    expect(got).toBe(answer);
    if (got.outcome === "applied") {
      expectTypeOf(got.value).toEqualTypeOf<RunTypes["answers"]["run.cancel"] | undefined>();
      expect(got.value?.outcome).toBe("cancel_requested");
      // @ts-expect-error a cancel's answer carries no `nodes`: the union is closed
      void got.value?.nodes;
    }
  });

  it("answerOf types an answer by command, and passes every other outcome through", () => {
    const refused: Asked<unknown> = { outcome: "refused", state: "new" };
    const typed = answerOf<RunTypes, "run.signal", Asked<unknown>>(refused);
    expect(typed).toBe(refused);
    if (typed.outcome === "applied") expectTypeOf(typed.value).toEqualTypeOf<RunTypes["answers"]["run.signal"] | undefined>();
    if (typed.outcome === "timeout") expectTypeOf(typed).toEqualTypeOf<{ outcome: "timeout" }>();
  });
});
