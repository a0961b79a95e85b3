// Type-checked (never run) by .ci/run against the installed package's ESM types.
import { TelltaleClient, TelltaleError, type SessionRow } from "@telltale/client";

const client = new TelltaleClient("http://127.0.0.1:1", "tt_key", { timeoutMs: 1000 });
export const rows: Promise<SessionRow[]> = client.lookup("0".repeat(24), []);
export const status: number | undefined = new TelltaleError(404, "missing").status;
