import { describe, expect, it } from "vitest";
import { cancelChecks, type LedgerLine, type SoakEvent } from "../soak/cancels.js";

// The soak's cancel check (docs/soak.md, `cancels`): fed crafted events and ledgers, it must count
// work a cancelled run could not have been offered before its cancel, and only that.
const RUN = "r1";
const cancelled = (at: number): SoakEvent => ({ type: "run_cancelled", at });
const line = (step: string, attempt: number, at: number): LedgerLine => ({ run: RUN, step, attempt, at });
const check = (evs: SoakEvent[], ledger: LedgerLine[], status = "cancelled") => cancelChecks(new Map([[RUN, evs]]), new Map([[RUN, ledger]]), () => status);

describe("soak cancel check", () => {
  it("a first attempt that starts on its worker just after the cancel is in flight, not resurrected", () => {
    const r = check([cancelled(1_000)], [line("s1", 1, 1_007)]);
    expect(r).toMatchObject({ cancelledRuns: 1, resurrected: [], inFlightAtCancel: 1 });
  });

  it("a retry offered at once before the cancel (a lost worker's attempt) and started just after it is in flight", () => {
    // The soak's 30-minute run on 08e6cc9: step_retrying (worker_lost) 9 ms before the cancel, attempt 2 started 7 ms after it.
    const evs = [{ type: "step_retrying", at: 991, node: "s1", attempt: 1, not_before: 991 }, cancelled(1_000)];
    expect(check(evs, [line("s1", 1, 100), line("s1", 2, 1_007)])).toMatchObject({ resurrected: [], inFlightAtCancel: 1 });
  });

  it("a retry with no offer before the cancel, or one whose offer waited on a backoff, is resurrected", () => {
    expect(check([cancelled(1_000)], [line("s1", 1, 100), line("s1", 2, 1_007)]).resurrected).toEqual([`${RUN}: 1 step invocation(s) after the cancel`]);
    const backoff = [{ type: "step_retrying", at: 900, node: "s1", attempt: 1, not_before: 990 }, cancelled(1_000)];
    expect(check(backoff, [line("s1", 1, 100), line("s1", 2, 1_007)]).resurrected).toHaveLength(1);
    // a map item's retry names its item
    const item = [{ type: "step_retrying", at: 991, node: "m", item: 2, attempt: 1, not_before: 991 }, cancelled(1_000)];
    expect(check(item, [line("m[2]", 1, 100), line("m[2]", 2, 1_007)]).resurrected).toEqual([]);
    expect(check(item, [line("m[3]", 1, 100), line("m[3]", 2, 1_007)]).resurrected).toHaveLength(1);
  });

  it("any invocation over 1 s after the cancel, a commit after it or another end is resurrected", () => {
    expect(check([cancelled(1_000)], [line("s1", 1, 2_001)]).resurrected).toHaveLength(1);
    expect(check([cancelled(1_000), { type: "step_succeeded", at: 1_010, node: "s1" }], []).resurrected).toEqual([
      `${RUN}: 0 step invocation(s) after the cancel, step_succeeded after it`,
    ]);
    expect(check([cancelled(1_000)], [], "succeeded").resurrected).toEqual([`${RUN}: 0 step invocation(s) after the cancel, status succeeded`]);
  });

  it("a child of a cancelled run that ended otherwise after the cancel is reported", () => {
    const events = new Map<string, SoakEvent[]>([
      [RUN, [{ type: "step_started", at: 10, node: "kid", child: "c1" }, cancelled(1_000)]],
      ["c1", [{ type: "run_succeeded", at: 1_400 }]],
    ]);
    expect(cancelChecks(events, new Map(), () => "cancelled").endedOtherwise).toEqual(["c1: child of cancelled r1, run_succeeded 400 ms after the cancel"]);
    // with the mailbox tapped, it says whether the cascade was sent to the child, and when
    expect(
      cancelChecks(
        events,
        new Map(),
        () => "cancelled",
        () => [900, 1_004],
      ).endedOtherwise,
    ).toEqual(["c1: child of cancelled r1, run_succeeded 400 ms after the cancel; a command published to it 4 ms after the cancel"]);
    expect(
      cancelChecks(
        events,
        new Map(),
        () => "cancelled",
        () => [900],
      ).endedOtherwise[0],
    ).toMatch(/no command published to it after the cancel$/);
  });
});
