// Type-checked (never run) by .ci/run against the installed package's CommonJS types.
import telltale = require("@telltale/client");

const client = new telltale.TelltaleClient("http://127.0.0.1:1", "tt_key", { timeoutMs: 1000 });
export const rows: Promise<telltale.SessionRow[]> = client.lookup("0".repeat(24), []);
export const chunk: 100 = telltale.LOOKUP_CHUNK;
