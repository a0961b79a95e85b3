// The published package (`npm run build`, run by `npm pack` and `npm publish` on prepack):
// TypeScript's compiler twice over src/, an ES module build in dist/esm and a CommonJS one in
// dist/cjs, each with its .d.ts types. dist/cjs gets a package.json of its own saying
// "commonjs", since this package's says "module".
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

process.chdir(new URL("..", import.meta.url).pathname);
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
for (const dir of ["dist/esm", "dist/cjs"]) rmSync(dir, { recursive: true, force: true });
for (const project of ["tsconfig.esm.json", "tsconfig.cjs.json"]) {
  const { status } = spawnSync(process.execPath, [tsc, "-p", project], { stdio: "inherit" });
  if (status !== 0) process.exit(status ?? 1);
}
writeFileSync("dist/cjs/package.json", JSON.stringify({ type: "commonjs" }) + "\n");
