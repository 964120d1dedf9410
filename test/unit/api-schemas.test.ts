import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { renderApiSchemas } from "../../scripts/api-schemas.js";

it("docs/api-schemas.md shows the JSON Schema of the requests the API validates with (regenerate: node --import tsx scripts/api-schemas.ts)", () => {
  const page = readFileSync(new URL("../../docs/api-schemas.md", import.meta.url), "utf8");
  expect(page).toBe(renderApiSchemas());
});
