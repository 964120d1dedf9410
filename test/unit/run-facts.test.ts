import { describe, expect, it } from "vitest";
import { RunFacts, type RunFact } from "../../machines/index.js";

/**
 * A run's memory with the facts of the batch being decided laid over it (`RunFacts.with`): each
 * command of a batch sees the stored facts and those of the commands before it, never those of
 * another batch.
 */
describe("RunFacts.with", () => {
  const item = (i: number, value: unknown): RunFact => ({ t: "item", node: "m", i, value });

  it("a batch's growing array of pending facts: each command sees every fact before it, stored ones included", () => {
    const memory = new RunFacts();
    memory.add({ t: "input", value: { n: 1 } });
    memory.add({ t: "output", node: "a", value: "stored" });
    const pending: RunFact[] = [];
    for (let i = 0; i < 40; i++) {
      const view = memory.with(pending);
      expect(view.input).toEqual({ n: 1 });
      expect(view.output("a")).toBe("stored");
      for (let j = 0; j < i; j++) expect(view.item("m", j)).toBe(j * 10);
      expect(view.item("m", i)).toBeUndefined();
      pending.push(item(i, i * 10));
    }
    expect(memory.with(pending).covers({ nodes: { m: { map: { succeeded: 40 } } } } as never)).toBe(true);
    expect(memory.with(pending.slice(0, 39)).covers({ nodes: { m: { map: { succeeded: 40 } } } } as never)).toBe(false);
  });

  it("another batch, a shorter array, or facts stored meanwhile: never a fact of another batch", () => {
    const memory = new RunFacts();
    memory.add({ t: "input", value: {} });
    const first: RunFact[] = [item(0, "first"), { t: "output", node: "b", value: "first-b" }];
    expect(memory.with(first).output("b")).toBe("first-b");
    const second: RunFact[] = [item(1, "second")];
    const view = memory.with(second);
    expect(view.item("m", 0)).toBeUndefined();
    expect(view.output("b")).toBeUndefined();
    expect(view.item("m", 1)).toBe("second");
    // The same array, cut back (a batch decided again from its start): only what it holds now.
    first.length = 0;
    first.push({ t: "input", value: { again: true } });
    expect(memory.with(first).input).toEqual({ again: true });
    expect(memory.with(first).output("b")).toBeUndefined();
    // The batch's facts are stored: they are the memory's own now, and an overlay of none is the memory.
    memory.add(item(1, "second"));
    expect(memory.with([])).toBe(memory);
    expect(memory.with(second).item("m", 1)).toBe("second");
  });
});
