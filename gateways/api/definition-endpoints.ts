import type { DefinitionStore } from "../../actors/index.js";
import { requests } from "./schemas.js";
import { DEFINITION_TOO_DEEP, type TenantEndpoint } from "./serve.js";

/** `definitions.put|get|list|disable|enable`. */
export function addDefinitionEndpoints(endpoint: TenantEndpoint, definitions: DefinitionStore, now: () => number): void {
  endpoint(
    "definitions_put",
    "definitions.put",
    requests.definitionsPut,
    (t, b) => definitions.put(t, b.definition, { publish: b.publish, now: now() }),
    DEFINITION_TOO_DEEP,
  );
  endpoint("definitions_get", "definitions.get", requests.definitionsGet, (t, b) => definitions.get(t, b.name, b.version));
  endpoint("definitions_list", "definitions.list", requests.definitionsList, async (t) => ({
    outcome: "ok",
    definitions: await definitions.list(t),
  }));
  endpoint("definitions_disable", "definitions.disable", requests.definitionsDisable, (t, b) => definitions.setDisabled(t, b.name, true));
  endpoint("definitions_enable", "definitions.enable", requests.definitionsEnable, (t, b) => definitions.setDisabled(t, b.name, false));
}
