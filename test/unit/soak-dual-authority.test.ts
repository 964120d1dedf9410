import { describe, expect, it } from "vitest";
import { scanStream, type PartitionRecord } from "../soak/dual-authority.js";

// The soak's dual-authority check (docs/soak.md): fed crafted partition streams, it must count the
// writes of a superseded owner and of two owners under one epoch, and nothing in a clean handover.
const claim = (seq: number, owner: string | null): PartitionRecord => ({ seq, fence: true, fenceOwner: owner });
const write = (seq: number, writer: string): PartitionRecord => ({ seq, fence: false, writer });

describe("soak dual-authority scan", () => {
  it("a clean handover (claim, writes, takeover, writes) has no violation", () => {
    // The first owner's fence record was rolled up by the takeover's: only its writes name epoch 1.
    const scan = scanStream("KV_rw_p0", [write(2, "a/1"), write(3, "a/1"), claim(4, "b"), write(5, "b/4"), { seq: 6, fence: false }, write(7, "b/4")]);
    expect(scan).toEqual({ writes: 4, violations: [] });
  });

  it("counts a write by an old owner after a newer owner's claim", () => {
    const scan = scanStream("KV_rw_p1", [write(2, "a/1"), claim(4, "b"), write(5, "b/4"), write(6, "a/1"), write(7, "b/4")]);
    expect(scan.writes).toBe(4);
    expect(scan.violations).toEqual(["KV_rw_p1 seq 6: a/1 wrote after the claim at 4 (b)"]);
  });

  it("counts an out-of-order epoch even when the newer claim's fence record is gone (seen only through its owner's writes)", () => {
    // b claimed at 10 (its record since rolled up by c's at 20); a, owner since 1, wrote at 12.
    const scan = scanStream("KV_rw_p2", [write(5, "a/1"), write(11, "b/10"), write(12, "a/1"), claim(20, "c"), write(21, "c/20")]);
    expect(scan.violations).toEqual(["KV_rw_p2 seq 12: a/1 wrote after the claim at 10 (b)"]);
    // and when the newer owner's first write comes only after the old owner's
    expect(scanStream("KV_rw_p2", [write(5, "a/1"), write(12, "a/1"), write(13, "b/10")]).violations).toEqual([
      "KV_rw_p2 seq 12: a/1 wrote after the claim at 10 (b)",
    ]);
  });

  it("counts two nodes under one epoch, a writer other than the claimant, a write after a release, and a bad header", () => {
    expect(scanStream("s", [write(2, "a/1"), write(3, "b/1")]).violations).toEqual(["s seq 3: b/1 under the epoch a wrote at 2"]);
    expect(scanStream("s", [claim(1, "a"), write(2, "b/1")]).violations).toEqual(["s seq 2: b/1 wrote under a claim made by a"]);
    expect(scanStream("s", [write(2, "a/1"), claim(3, null), write(4, "a/1")]).violations).toEqual(["s seq 4: a/1 wrote after the claim at 3 (a release)"]);
    expect(scanStream("s", [write(2, "a/2"), write(3, "a"), write(4, "a/x")]).violations).toHaveLength(3);
  });

  it("reads records in any order (they are sorted by sequence)", () => {
    expect(scanStream("s", [write(6, "a/1"), write(5, "b/4"), claim(4, "b")]).violations).toEqual(["s seq 6: a/1 wrote after the claim at 4 (b)"]);
  });
});
