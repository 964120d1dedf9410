/**
 * Records keyed by caller-supplied names (tenants, projects, ticket ids) are read only through
 * own properties, so a name like `constructor` or `__proto__` is just a name.
 */
export function own<V>(record: Readonly<Record<string, V>>, key: string): V | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** A copy with `key` set (a computed key defines an own property, even for `__proto__`). */
export function withKey<V>(record: Readonly<Record<string, V>>, key: string, value: V): Record<string, V> {
  return { ...record, [key]: value };
}

/** A copy without `key` (rebuilt rather than `delete`d, which would leave V8 a slow dictionary object). */
export function withoutKey<V>(record: Readonly<Record<string, V>>, key: string): Record<string, V> {
  if (!Object.hasOwn(record, key)) return record as Record<string, V>;
  return Object.fromEntries(Object.entries(record).filter(([k]) => k !== key));
}

/** `record[key] + delta`, dropping the key when it reaches zero. */
export function addCount(record: Readonly<Record<string, number>>, key: string, delta: number): Record<string, number> {
  const value = (own(record, key) ?? 0) + delta;
  return value > 0 ? withKey(record, key, value) : withoutKey(record, key);
}
