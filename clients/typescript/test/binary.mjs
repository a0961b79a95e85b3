// Run before the tests are compiled (`npm test`'s pretest): they start the real `telltale`
// binary, so say at once when it is not there rather than wait for a server that never starts.
import { accessSync, constants } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const binary =
  process.env.TELLTALE_BIN ||
  join(process.env.CARGO_TARGET_DIR || join(homedir(), ".cache", "telltale-target"), "debug", "telltale");
try {
  accessSync(binary, constants.X_OK);
} catch (error) {
  console.error(
    `telltale binary not found at ${binary} (${error.code}): the tests run against the real binary; ` +
      "build it with `cargo build` or set TELLTALE_BIN to its path",
  );
  process.exit(1);
}
