// Smoke test of the packed npm package, run by .ci/run from a clean folder where the tarball was
// installed (never from this checkout): both entry points, ES module `import` and CommonJS
// `require`, load and make a real call against the server at TELLTALE_URL with TELLTALE_KEY.
// One line per result; any mismatch exits non-zero.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

import * as esm from "@telltale/client";

const require = createRequire(import.meta.url);
const cjs = require("@telltale/client");
const { TELLTALE_URL: url, TELLTALE_KEY: key } = process.env;
assert.ok(url && key, "TELLTALE_URL and TELLTALE_KEY must be set");

const resolved = { esm: import.meta.resolve("@telltale/client"), cjs: require.resolve("@telltale/client") };
assert.match(resolved.esm, /\/node_modules\/@telltale\/client\/dist\/esm\/index\.js$/);
assert.match(resolved.cjs, /\/node_modules\/@telltale\/client\/dist\/cjs\/index\.js$/);
const pkg = JSON.parse(readFileSync(require.resolve("@telltale/client/package.json"), "utf8"));
assert.equal(pkg.license, "Apache-2.0");
for (const [how, mod] of Object.entries({ esm, cjs })) {
  assert.equal(typeof mod.TelltaleClient, "function", `${how}: no TelltaleClient export`);
  assert.equal(mod.LOOKUP_CHUNK, 100, `${how}: LOOKUP_CHUNK`);
  const client = new mod.TelltaleClient(url, key);
  const context = await client.context();
  assert.ok(key.startsWith(`${context.key.prefix}_`), `${how}: context is of another key`);
  const survey = await client.provisionSurvey(`smoke-npm-${how}`, `Smoke (${how})`);
  assert.match(survey.surveyId, /^[0-9a-f]{24}$/, `${how}: survey id`);
  const [row] = await client.lookup(survey.surveyId, ["00000000-0000-4000-8000-000000000000"]);
  assert.equal(row.captured, false, `${how}: lookup of an unknown reference`);
  const error = await client.startScoringRun("0".repeat(24)).catch((e) => e);
  assert.ok(error instanceof mod.TelltaleError && error.status === 404, `${how}: 404 as TelltaleError`);
  console.log(`npm smoke ${how} ok: ${pkg.name}@${pkg.version} from ${resolved[how].split("/node_modules/")[1]}, survey ${survey.surveyId}`);
}
