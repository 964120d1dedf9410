import { expect, it } from "vitest";
import { Lifecycle } from "../../runtime/lifecycle.js";
import { silentLogger } from "../../runtime/log.js";

it("starts stages in order, stops them in reverse, and runs every stop even when one throws", async () => {
  const seen: string[] = [];
  const lc = new Lifecycle(silentLogger)
    .add({ name: "a", start: () => void seen.push("start a"), stop: () => void seen.push("stop a") })
    .add({
      name: "b",
      start: () => void seen.push("start b"),
      stop: () => {
        seen.push("stop b");
        throw new Error("b");
      },
    })
    .add({ name: "c", start: () => void seen.push("start c"), stop: () => void seen.push("stop c") });
  await lc.start();
  await expect(lc.stop()).rejects.toThrow(AggregateError);
  expect(seen).toEqual(["start a", "start b", "start c", "stop c", "stop b", "stop a"]);
});

it("stops what did start when a later stage fails to start", async () => {
  const seen: string[] = [];
  const lc = new Lifecycle(silentLogger).add({ name: "a", start: () => void seen.push("start a"), stop: () => void seen.push("stop a") }).add({
    name: "b",
    start: () => {
      throw new Error("no");
    },
    stop: () => void seen.push("stop b"),
  });
  await expect(lc.start()).rejects.toThrow("no");
  expect(seen).toEqual(["start a", "stop a"]);
});
