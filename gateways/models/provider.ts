import { AnthropicProvider } from "./anthropic.js";
import type { ModelProviderRecord } from "./config.js";
import { OpenAiProvider } from "./openai.js";
import { ScriptedProvider } from "./scripted.js";
import type { ModelCallOptions, ModelOutcome, ModelProvider, ModelRequest } from "./types.js";

/**
 * The adapter for a record, behind the record's own rules: a model the record does not list is
 * `model_not_found` without a request. The SDK behind an adapter is loaded on its first call.
 */
export function createModelProvider(record: ModelProviderRecord): ModelProvider {
  const inner = adapter(record);
  return {
    name: inner.name,
    kind: inner.kind,
    complete(request: ModelRequest, options?: ModelCallOptions): Promise<ModelOutcome> {
      if (!record.allows(request.model)) {
        return Promise.resolve({
          outcome: "failed",
          failure: { code: "model_not_found", message: `provider '${record.name}' offers no model '${request.model}'` },
        });
      }
      return inner.complete(request, options);
    },
  };
}

function adapter(record: ModelProviderRecord): ModelProvider {
  switch (record.spec.kind) {
    case "openai":
      return new OpenAiProvider(record);
    case "anthropic":
      return new AnthropicProvider(record);
    case "scripted":
      return new ScriptedProvider(record);
  }
}
