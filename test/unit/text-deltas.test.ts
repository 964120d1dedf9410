import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { TextDeltaCoalescer } from "../../actors/agent/index.js";

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

function world(maxChars = 10, maxMs = 50) {
  const sent: [number, string][] = [];
  return { sent, c: new TextDeltaCoalescer((turn, text) => sent.push([turn, text]), maxChars, maxMs) };
}

it("38 §5 live tokens are coalesced: pieces join until maxChars have gathered, then go out at once, in order", () => {
  const { sent, c } = world();
  for (const piece of ["abc", "def", "ghij", "k"]) c.push(0, piece);
  expect(sent).toEqual([[0, "abcdefghij"]]);
  c.flush();
  expect(sent).toEqual([
    [0, "abcdefghij"],
    [0, "k"],
  ]);
});

it("38 §5 live tokens are coalesced: what gathered goes out maxMs after its first piece, without waiting for more", () => {
  const { sent, c } = world();
  c.push(0, "ab");
  vi.advanceTimersByTime(49);
  c.push(0, "cd");
  expect(sent).toEqual([]);
  vi.advanceTimersByTime(1);
  expect(sent).toEqual([[0, "abcd"]]);
  vi.advanceTimersByTime(1_000);
  expect(sent).toHaveLength(1);
});

it("38 §5 live tokens are coalesced: a new turn sends the last one's rest first; a flush with nothing gathered sends nothing", () => {
  const { sent, c } = world();
  c.push(0, "end of 0");
  c.push(1, "start of 1");
  c.flush();
  c.flush();
  expect(sent).toEqual([
    [0, "end of 0"],
    [1, "start of 1"],
  ]);
});
