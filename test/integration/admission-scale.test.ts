import { expect, it } from "vitest";
import { measureAdmission } from "../bench/admission.js";

/**
 * Issue 9, acceptance 6: a tenant with 10,000 running and 5,000 queued runs admits its next run
 * as fast (p50 within 1.5×) as a tenant with 10, and no record grows with the population. The
 * two tenants are measured interleaved (each round admits one run in each, in a random order,
 * then ends it), so load from anything else on the machine falls on both alike; medians over
 * 300 rounds each.
 */
it("a tenant holding 10,000 running and 5,000 queued runs admits its next run as fast as one holding 10 (p50 within 1.5×); its record is no larger", async () => {
  const r = await measureAdmission({ running: 9_999, queued: 5_000, small: 9, samples: 300 });
  console.log(
    `admission p50: big ${r.big.p50} ms, small ${r.small.p50} ms (ratio ${r.ratio_p50}); records ${r.big.record_bytes} / ${r.small.record_bytes} bytes; filled in ${r.fill_s} s`,
  );
  expect(r.big).toMatchObject({ running: 9_999, queued: 5_000 });
  expect(r.big.p50).toBeLessThanOrEqual(1.5 * r.small.p50);
  // The record holds counters, not members: the same size whatever the population (the applied-command window aside).
  expect(r.big.record_bytes).toBeLessThan(r.small.record_bytes + 1_024);
}, 300_000);
