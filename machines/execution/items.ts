import type { ItemRun, MapRun } from "./types.js";

/**
 * Copy-on-write for a map's live items, so a decision costs the items it reaches, not the map's
 * width: the `live` index is copied when first changed, an item when reached (`liveItem`); untouched
 * items stay the previous state's objects, which must stay intact (a failed write is decided again
 * from it). What a draft knows of its decision rides on the objects under non-enumerable symbol
 * keys (never stored, never spread), so there is no registry outside the state.
 */
type Live = MapRun["live"];

interface Draft {
  /** The index the draft started from (the previous state's). */
  base: Live;
  /** Whether `live` is the draft's own copy yet. */
  own: boolean;
  /** Keys the decision reached: items copied, added or removed. */
  reached: Set<string>;
}

/** How many items of an index are live, and of those in flight or waiting to be offered. */
export interface ItemLoad {
  size: number;
  inFlight: number;
  waiting: number;
}

/**
 * What a sealed index knows: the index it was copied from (weakly: holding it would keep every
 * earlier version of a long-lived map alive, each holding the one before) and the keys its
 * decision reached; and its items' load, once counted or carried.
 */
interface IndexFacts {
  from?: WeakRef<Live>;
  reached?: ReadonlySet<string>;
  load?: ItemLoad;
}

const DRAFT = Symbol("map draft");
const FACTS = Symbol("index facts");

type Drafted = MapRun & { [DRAFT]?: Draft };
type Known = Live & { [FACTS]?: IndexFacts };

function draftOf(map: MapRun): Draft | undefined {
  return (map as Drafted)[DRAFT];
}

function markDraft(map: MapRun, draft: Draft): void {
  Object.defineProperty(map, DRAFT, { value: draft, writable: true, configurable: true, enumerable: false });
}

function factsOf(live: Live): IndexFacts | undefined {
  return (live as Known)[FACTS];
}

/** Keeps `facts` on `live` (not on a frozen index: a state the tests' driver froze). */
function keepFacts(live: Live, facts: IndexFacts): void {
  const known = (live as Known)[FACTS];
  if (known) Object.assign(known, facts);
  else if (Object.isExtensible(live)) Object.defineProperty(live, FACTS, { value: facts, writable: true, enumerable: false });
}

/** The index a new map's draft starts from, and its load. */
const EMPTY: Live = Object.freeze({});
const NO_LOAD: Readonly<ItemLoad> = Object.freeze({ size: 0, inFlight: 0, waiting: 0 });

/** The load of `live` if it is known (counted, or carried to it). */
function knownLoad(live: Live): Readonly<ItemLoad> | undefined {
  return live === EMPTY ? NO_LOAD : factsOf(live)?.load;
}

/** A map's state when it starts: `total` items, none made yet (a draft of the decision making it). */
export function newMap(total: number): MapRun {
  const map: MapRun = { total, next: 0, live: {}, succeeded: 0, failed: 0, output_bytes: 0 };
  markDraft(map, { base: EMPTY, own: true, reached: new Set() });
  return map;
}

/** A map the decision being made may change: its `live` index and items shared until reached. */
export function draftMap(map: MapRun): MapRun {
  const draft = { ...map };
  markDraft(draft, { base: map.live, own: false, reached: new Set() });
  return draft;
}

/** The decision is made: the maps it drafted (`maps`, any others ignored) are state now, and reaching their items copies nothing. */
export function sealDrafts(maps: Iterable<MapRun>): void {
  for (const map of maps) {
    const draft = draftOf(map);
    if (!draft) continue;
    delete (map as Drafted)[DRAFT];
    if (!draft.own) continue;
    const before = knownLoad(draft.base);
    // Carried only along a lineage already counted: a map nobody asked the load of costs nothing.
    keepFacts(map.live, {
      from: new WeakRef(draft.base),
      reached: draft.reached,
      ...(before ? { load: carried(before, draft.base, map.live, draft.reached) } : {}),
    });
  }
}

/** The draft's index, its own copy from now on. A loop over the keys: a spread of an index with holes in it costs about three times as much. */
function own(map: MapRun, draft: Draft): void {
  if (draft.own) return;
  const copy: Live = {};
  const keys = Object.keys(map.live);
  for (let i = 0; i < keys.length; i++) copy[keys[i]!] = map.live[keys[i]!]!;
  map.live = copy;
  draft.own = true;
}

/** Item `key` of `map`, to read or change: in a draft, a copy of its own the first time it is reached. */
export function liveItem(map: MapRun, key: string): ItemRun | undefined {
  const it = map.live[key];
  const draft = draftOf(map);
  if (it === undefined || draft === undefined || draft.reached.has(key)) return it;
  own(map, draft);
  const copy = { ...it };
  map.live[key] = copy;
  draft.reached.add(key);
  return copy;
}

/** Every live item of `map` by index, each reached as by {@link liveItem}. */
export function liveItems(map: MapRun): [string, ItemRun][] {
  return Object.keys(map.live).map((key) => [key, liveItem(map, key)!]);
}

/** Whether any item of `map` is live (without listing them: a loop over an index emptied from the front walks its holes). */
export function hasLive(map: MapRun): boolean {
  return itemLoad(map).size > 0;
}

/** A new item of a draft (already its own). */
export function addItem(map: MapRun, key: string, it: ItemRun): void {
  const draft = draftOf(map);
  if (draft) {
    own(map, draft);
    draft.reached.add(key);
  }
  map.live[key] = it;
}

/** Item `key` leaves the map's live items. */
export function removeItem(map: MapRun, key: string): void {
  const draft = draftOf(map);
  if (draft) {
    if (!(key in map.live)) return;
    own(map, draft);
    draft.reached.add(key);
  }
  delete map.live[key];
}

/**
 * The keys whose items may differ between two states' indexes of one map: those the decision
 * that made `after` from `before` reached, or undefined when that is not known (compare them all).
 */
export function changedKeys(before: Live | undefined, after: Live | undefined): ReadonlySet<string> | undefined {
  if (!before || !after) return undefined;
  const made = factsOf(after);
  return made?.from !== undefined && made.from.deref() === before ? made.reached : undefined;
}

/** Whether an item holds a place of the map's concurrency (offered, leased or running). */
function inFlight(it: ItemRun): boolean {
  return it.step.status === "leased" || it.step.status === "running" || it.offered !== undefined;
}

/** Whether an item is ready and not offered: waiting to be offered again (a retry, or no room). */
function waiting(it: ItemRun): boolean {
  return it.step.status === "ready" && it.offered === undefined;
}

/**
 * How many of `map`'s live items are in flight and waiting, as they are now. Counted once per
 * lineage of indexes, then carried through the keys each decision reached.
 */
export function itemLoad(map: MapRun): ItemLoad {
  const known = knownLoad(map.live);
  if (known) return { ...known };
  const draft = draftOf(map);
  // An index no draft owns is a state's: never changed again, so its load is kept.
  if (!draft?.own) return { ...loadOf(map.live) };
  return carried(loadOf(draft.base), draft.base, map.live, draft.reached);
}

function loadOf(live: Live): Readonly<ItemLoad> {
  const known = knownLoad(live);
  if (known) return known;
  const load = { size: 0, inFlight: 0, waiting: 0 };
  for (const i in live) tally(load, live[i]!, 1);
  keepFacts(live, { load });
  return load;
}

function carried(before: Readonly<ItemLoad>, from: Live, to: Live, reached: ReadonlySet<string>): ItemLoad {
  const load = { ...before };
  for (const key of reached) {
    const was = from[key];
    const now = to[key];
    if (was === now) continue;
    if (was) tally(load, was, -1);
    if (now) tally(load, now, 1);
  }
  return load;
}

function tally(load: ItemLoad, it: ItemRun, by: 1 | -1): void {
  load.size += by;
  if (inFlight(it)) load.inFlight += by;
  else if (waiting(it)) load.waiting += by;
}
