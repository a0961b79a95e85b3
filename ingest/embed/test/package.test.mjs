// The npm package of the embed: its ES module exports the API the types describe, its version
// is the package's, it fails open outside a browser, and the served script stays within its
// size budget, raw and compressed.
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { brotliCompressSync, gzipSync } from "node:zlib";

import Telltale, { Telltale as named } from "../dist/telltale.mjs";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const types = readFileSync(new URL("../telltale.d.ts", import.meta.url), "utf8");

test("the module exports the API the types describe, at the package's version", () => {
  assert.equal(Telltale, named);
  assert.equal(Telltale.version, pkg.version);
  for (const method of ["start", "stop", "stats", "flush"]) {
    assert.equal(typeof Telltale[method], "function", method);
    assert.match(types, new RegExp(`\\b${method}\\(`), `telltale.d.ts declares ${method}`);
  }
});

test("it fails open: unusable options and a page without a DOM throw nothing", () => {
  assert.equal(Telltale.start({}), false);
  assert.equal(Telltale.start({ trackingKey: "nope", collectorApiUrl: "http://x" }), false);
  assert.equal(Telltale.stats(), null);
  assert.doesNotThrow(() => Telltale.flush());
  assert.doesNotThrow(() => Telltale.stop());
});

test("the script stays within its size budget", () => {
  const script = readFileSync(new URL("../telltale.js", import.meta.url));
  // Budgets with some room over today's 26.3 KiB raw, 8.6 KiB gzip, 7.4 KiB brotli (embed 1.4's
  // delivery and content counts added 1.3 KiB gzip to 1.3's 7.3 KiB).
  assert.ok(script.length <= 28 * 1024, `${script.length} bytes raw`);
  assert.ok(gzipSync(script, { level: 9 }).length <= 9 * 1024, "gzip over 9 KiB");
  assert.ok(brotliCompressSync(script).length <= 8 * 1024, "brotli over 8 KiB");
});
