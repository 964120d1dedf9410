import type { ItemRun, MapRun } from "./types.js";

/**
 * Copy-on-write for a map's live items. A decision copies the run's head and nodes, but a map's
 * items only when it reaches one to change it (`liveItem`), so a result for one item of a
 * 1,000-wide map copies that item, not all 1,000, and the items it did not touch stay the same
 * objects as in the previous state (which the decision must leave as it was: a write that fails
 * is decided again from it).
 *
 * The maps of the decision being made are drafts until `sealDrafts`: reaching an item of a draft
 * copies it once; reaching one of any other map (a guard reading the current state) returns it
 * as it is. Decisions are synchronous, so one registry serves them all.
 */
const drafts = new Map<MapRun, Set<string>>();

/** A map the decision being made may change: its own `live` index, items shared until reached. */
export function draftMap(map: MapRun): MapRun {
  const draft = { ...map, live: { ...map.live } };
  drafts.set(draft, new Set());
  return draft;
}

/** The decision is made: its maps are state now, and reaching their items copies nothing. */
export function sealDrafts(): void {
  drafts.clear();
}

/** Item `key` of `map`, to read or change: in a draft, a copy of its own the first time it is reached. */
export function liveItem(map: MapRun, key: string): ItemRun | undefined {
  const it = map.live[key];
  const copied = drafts.get(map);
  if (it === undefined || copied === undefined || copied.has(key)) return it;
  const copy = { ...it };
  map.live[key] = copy;
  copied.add(key);
  return copy;
}

/** Every live item of `map` by index, each reached as by {@link liveItem}. */
export function liveItems(map: MapRun): [string, ItemRun][] {
  return Object.keys(map.live).map((key) => [key, liveItem(map, key)!]);
}

/** Whether any item of `map` is live (without listing them). */
export function hasLive(map: MapRun): boolean {
  for (const _ in map.live) return true;
  return false;
}

/** A new item of a draft (already its own). */
export function addItem(map: MapRun, key: string, it: ItemRun): void {
  map.live[key] = it;
  drafts.get(map)?.add(key);
}
