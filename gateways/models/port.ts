import type { ModelPort, TurnOutcome, TurnPrice } from "../../actors/index.js";
import type { ModelProviderRecord } from "./config.js";
import { createModelProvider } from "./provider.js";
import { completeWithRetry, type RetryDeps } from "./retry.js";
import type { ModelStore } from "./store.js";
import type { ModelProvider, ModelRequest } from "./types.js";

/**
 * The model gateway agent steps call: `<provider>/<model>` is found in the tenant's providers
 * (the node's watched copy, no store read), and the turn is asked with the retry policy
 * (`completeWithRetry`: rate limits and transient faults only). Keys never leave this folder.
 */
export function modelPortOf(store: Pick<ModelStore, "provider">, retry: RetryDeps = {}): ModelPort {
  // One adapter per stored record: a changed record is a new object, so its adapter is made again.
  const adapters = new WeakMap<ModelProviderRecord, ModelProvider>();
  return {
    async complete(
      tenant: string,
      model: string,
      request: ModelRequest,
      options: { signal: AbortSignal; onDelta?: (text: string) => void },
    ): Promise<TurnOutcome> {
      const slash = model.indexOf("/");
      const name = slash > 0 ? model.slice(0, slash) : model;
      const record = await store.provider(tenant, name).catch(() => undefined);
      if (!record) return { outcome: "failed", failure: { code: "model_not_found", message: `no model provider named '${name}' is registered` } };
      let provider = adapters.get(record);
      if (!provider) adapters.set(record, (provider = createModelProvider(record)));
      return completeWithRetry(provider, { ...request, model: model.slice(slash + 1) }, options, retry);
    },
    async kindOf(tenant: string, model: string): Promise<string | undefined> {
      const slash = model.indexOf("/");
      const record = await store.provider(tenant, slash > 0 ? model.slice(0, slash) : model).catch(() => undefined);
      return record?.kind;
    },
    async price(tenant: string, model: string): Promise<TurnPrice | undefined> {
      const slash = model.indexOf("/");
      // A store that cannot be read throws: the turn is not asked unmetered (`metering_unavailable`).
      const record = await store.provider(tenant, slash > 0 ? model.slice(0, slash) : model);
      return record?.price(model.slice(slash + 1));
    },
  };
}
