// Builds the ES module of the embed (dist/telltale.mjs) from the script build (telltale.js), which
// stays the one source: the service serves telltale.js as it is (`/embed/v1/telltale.js`).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";

const source = readFileSync(new URL("./telltale.js", import.meta.url), "utf8");
const invocation = '})(typeof window !== "undefined" ? window : this);';
const end = source.trimEnd();
if (!end.endsWith(invocation)) {
  throw new Error(`telltale.js no longer ends with ${invocation}: update build.mjs`);
}
const module = [
  "// Generated from telltale.js by build.mjs (npm run build): do not edit.",
  'const scope = typeof window !== "undefined" ? window : globalThis;',
  end.slice(0, -invocation.length) + "})(scope);",
  "/** The embed's API (also `window.Telltale` in a browser). */",
  "export const Telltale = scope.Telltale;",
  "export default Telltale;",
  "",
].join("\n");
mkdirSync(new URL("./dist/", import.meta.url), { recursive: true });
writeFileSync(new URL("./dist/telltale.mjs", import.meta.url), module);
