import { ModelProviderRecord, type ModelStore } from "../models/index.js";
import { requests } from "./schemas.js";
import type { TenantEndpoint } from "./serve.js";

/**
 * `models.put|get|list|delete`: the tenant's model providers. Every answer shows a provider's
 * view (its key only as `api_key_set`); a refused record names the fields at fault, never a value.
 */
export function addModelEndpoints(endpoint: TenantEndpoint, models: ModelStore, now: () => number): void {
  endpoint("models_put", "models.put", requests.modelsPut, async (t, b) => {
    const parsed = ModelProviderRecord.parse(b.provider);
    if (parsed.outcome === "invalid") return { outcome: "invalid_input", reason: parsed.reason };
    return models.put(t, parsed.record, now());
  });
  endpoint("models_get", "models.get", requests.modelName, async (t, b) => {
    const provider = await models.get(t, b.name);
    return provider ? { outcome: "found", provider } : { outcome: "model_provider_not_found" };
  });
  endpoint("models_list", "models.list", requests.modelsList, async (t) => ({ outcome: "ok", providers: await models.list(t) }));
  endpoint("models_delete", "models.delete", requests.modelName, async (t, b) =>
    (await models.delete(t, b.name)) ? { outcome: "deleted" } : { outcome: "model_provider_not_found" },
  );
}
