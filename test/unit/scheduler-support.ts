import type { TenantPolicy } from "../../machines/scheduler/index.js";

/** Shared by the scheduler tests: a fixed clock origin and small helpers. */
export const T0 = 1_700_000_000_000;

/** Tenant policies from a plain map; an unknown tenant has none (and leases nothing). */
export function lookup(map: Record<string, TenantPolicy>): (tenant: string) => TenantPolicy | undefined {
  return (tenant) => (Object.hasOwn(map, tenant) ? map[tenant] : undefined);
}

/** The next of `values`, round and round (release choices drawn by fast-check). */
export function cycler(): (values: readonly number[]) => number {
  let i = 0;
  return (values) => values[i++ % values.length] as number;
}
