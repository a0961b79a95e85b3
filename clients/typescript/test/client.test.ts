// The TypeScript client against the real `telltale` binary (TELLTALE_BIN, default the debug
// build in CARGO_TARGET_DIR): the OpenAPI document its types come from is the one served;
// provisioning, lookup in chunks, runs and deletions waited for, errors not retried, and a storm
// of 429s ridden out under a lowered limit.

import { strict as assert } from "node:assert";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomInt, randomUUID } from "node:crypto";
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";

import { DEFAULT_RETRY, LOOKUP_CHUNK, TelltaleClient, TelltaleError, retryWait } from "../src/index.js";

const binary =
  process.env.TELLTALE_BIN ||
  join(process.env.CARGO_TARGET_DIR || join(homedir(), ".cache", "telltale-target"), "debug", "telltale");
// Also checked before compiling (test/binary.mjs): fail at once, not after a 120 s wait.
try {
  accessSync(binary, constants.X_OK);
} catch (error) {
  throw new Error(
    `telltale binary not found at ${binary} (${(error as NodeJS.ErrnoException).code}): the tests run against ` +
      "the real binary; build it with `cargo build` or set TELLTALE_BIN to its path",
  );
}

class Server {
  url = "";
  key = "";
  private constructor(
    private readonly process: ChildProcessWithoutNullStreams,
    private readonly dir: string,
  ) {}

  static async start(...args: string[]): Promise<Server> {
    const dir = mkdtempSync(join(tmpdir(), "telltale-tsclient-"));
    const child = spawn(binary, ["serve", "--bind", "127.0.0.1:0", "--data-dir", dir, ...args]);
    child.stderr.resume();
    const server = new Server(child, dir);
    const lines = createInterface({ input: child.stdout });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("telltale serve did not start within 120 s")), 120_000);
      lines.on("line", (line) => {
        if (line.startsWith("telltale listening on ")) server.url = line.split(" ").at(-1) ?? "";
        if (line.startsWith("TELLTALE_INTEGRATION_KEY=")) server.key = line.slice(line.indexOf("=") + 1);
        if (server.url && server.key) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.on("exit", (code) => reject(new Error(`telltale serve exited with ${code}`)));
      child.on("error", (error) => reject(new Error(`telltale serve (${binary}) did not start: ${error.message}`)));
    });
    return server;
  }

  async collect(trackingKey: string, identifier: string, events: number): Promise<void> {
    const t0 = 1_763_800_000_000;
    const batch = {
      events: Array.from({ length: events }, (_, i) => ({
        type: "pointermove",
        timestamp: t0 + 16 * i + randomInt(6),
        data: { x: 100 + 3 * i + randomInt(5), y: 200 + i, pointerType: "mouse", trusted: true },
      })),
    };
    const response = await fetch(`${this.url}/event/${trackingKey}/${identifier}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(batch),
    });
    assert.equal(response.status, 201, await response.text());
  }

  async stop(): Promise<void> {
    const exited = new Promise((resolve) => this.process.once("exit", resolve));
    this.process.kill("SIGTERM");
    await exited;
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function waitCaptured(client: TelltaleClient, surveyId: string, reference: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await client.lookup(surveyId, [reference]))[0].captured) {
    assert.ok(Date.now() < deadline, `${reference} not captured after 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("against the service", () => {
  let server: Server;
  before(async () => {
    server = await Server.start("--api-rate-per-minute", "100000");
  });
  after(async () => server.stop());

  test("the types come from the OpenAPI document the service serves", async () => {
    const served = await (await fetch(`${server.url}/integrations/v1/openapi.json`)).json();
    const used = JSON.parse(readFileSync(new URL("../../openapi.json", import.meta.url), "utf8"));
    assert.deepEqual(used, served, "clients/typescript/openapi.json is stale: fetch it again and run `npm run generate`");
  });

  test("context and idempotent provisioning", async () => {
    const client = new TelltaleClient(server.url, server.key);
    const context = await client.context();
    assert.ok(server.key.startsWith(context.key.prefix + "_"));
    assert.equal(context.key.scopes.length, 5);
    const first = await client.provisionSurvey("panel/2026 spring", "Spring panel");
    const again = await client.provisionSurvey("panel/2026 spring", "Spring panel, renamed");
    assert.equal(first.surveyId, again.surveyId);
    assert.match(first.surveyId, /^[0-9a-f]{24}$/);
  });

  test("lookup of many references in chunks keeps their order", async () => {
    let requests = 0;
    const client = new TelltaleClient(server.url, server.key, { onResponse: () => (requests += 1) });
    const survey = await client.provisionSurvey("lookup-chunks", "Lookup");
    const captured = randomUUID();
    await server.collect(survey.trackingKey, captured, 20);
    await waitCaptured(client, survey.surveyId, captured);
    const references = Array.from({ length: 2 * LOOKUP_CHUNK + 50 }, () => randomUUID());
    references[137] = captured;
    requests = 0;
    const rows = await client.lookup(survey.surveyId, references);
    assert.equal(requests, 3);
    assert.deepEqual(
      rows.map((row) => row.externalReference),
      references,
    );
    assert.equal(rows[137].captured, true);
    assert.equal(rows[137].eventCount, 20);
    assert.ok(rows.filter((_, i) => i !== 137).every((row) => !row.captured && row.humanScorePercent === null));
  });

  test("score and wait, then read the scores; erase one", async () => {
    const client = new TelltaleClient(server.url, server.key);
    const survey = await client.provisionSurvey("scoring", "Scoring");
    const references = [randomUUID(), randomUUID()];
    for (const reference of references) await server.collect(survey.trackingKey, reference, 60);
    for (const reference of references) await waitCaptured(client, survey.surveyId, reference);
    const run = await client.scoreAndWait(survey.surveyId, { pollIntervalMs: 200, timeoutMs: 120_000 });
    assert.equal(run.status, "completed", JSON.stringify(run));
    assert.equal(run.scored, 2);
    for (const row of await client.lookup(survey.surveyId, references)) {
      assert.ok(row.humanScorePercent !== null && row.humanScorePercent >= 0 && row.humanScorePercent <= 100);
      assert.ok(["automation-like", "review", "human-like"].includes(row.scoreBand ?? ""));
    }
    const [row] = await client.lookup(survey.surveyId, [references[1]]);
    const evidence = await client.evidence(survey.surveyId, references[1]);
    assert.equal(evidence.score?.scoreBand, row.scoreBand);
    assert.equal(evidence.score?.humanScorePercent, row.humanScorePercent);
    assert.equal(evidence.timeline.eventCount, 60);
    assert.ok(evidence.features.length > 50, `${evidence.features.length} features`);
    const deletion = await client.deleteAndWait(survey.surveyId, references[0], { pollIntervalMs: 100 });
    assert.equal(deletion.status, "completed");
    await assert.rejects(client.evidence(survey.surveyId, references[0]), (error: TelltaleError) => error.status === 404);
    assert.equal((await client.lookup(survey.surveyId, [references[0]]))[0].captured, false);
  });

  test("the survey's summary, its list page by page and as CSV, and a desk link", async () => {
    const client = new TelltaleClient(server.url, server.key);
    const survey = await client.provisionSurvey("desk", "Desk");
    const references = [randomUUID(), randomUUID(), randomUUID()];
    for (const reference of references) await server.collect(survey.trackingKey, reference, 60);
    for (const reference of references) await waitCaptured(client, survey.surveyId, reference);
    const run = await client.scoreAndWait(survey.surveyId, { pollIntervalMs: 200, timeoutMs: 120_000 });
    assert.equal(run.scored, 3, JSON.stringify(run));
    const summary = await client.surveySummary(survey.surveyId);
    assert.equal(summary.scored, 3);
    assert.equal(summary.bands["automation-like"] + summary.bands.review + summary.bands["human-like"], 3);
    assert.equal(summary.histogram.length, 20);
    const page = await client.sessionsPage(survey.surveyId, { limit: 2, order: "desc" });
    assert.equal(page.data.length, 2);
    assert.ok(page.next);
    assert.ok(page.data[0].humanScorePercent >= page.data[1].humanScorePercent);
    const all: string[] = [];
    for await (const session of client.sessions(survey.surveyId)) all.push(session.reference);
    assert.deepEqual([...all].sort(), [...references].sort());
    const csv = await client.sessionsCsv(survey.surveyId);
    assert.equal(csv.trim().split("\n").length, 4, csv);
    assert.ok(csv.startsWith("reference,human_score_percent,score_band,"));
    await assert.rejects(
      client.sessionsPage(survey.surveyId, { limit: 0 }),
      (error: TelltaleError) => error.status === 400,
    );
    const link = await client.createDeskLink(survey.surveyId, 60);
    assert.ok(link.url.startsWith(`${server.url}/desk/${survey.surveyId}?`), link.url);
    assert.equal((await fetch(link.url)).status, 200);
  });

  test("client errors are raised at once, not retried", async () => {
    let requests = 0;
    const client = new TelltaleClient(server.url, server.key, { onResponse: () => (requests += 1) });
    await assert.rejects(client.startScoringRun("0".repeat(24)), (error: TelltaleError) => error.status === 404);
    assert.equal(requests, 1);
    assert.throws(() => client.deletion("0".repeat(24), "not-a-uuid"), TypeError);
    const stranger = new TelltaleClient(server.url, "tt_" + "0".repeat(40));
    await assert.rejects(stranger.context(), (error: TelltaleError) => error.status === 401);
  });

  test("connection failures are retried a bounded number of times", async () => {
    const started = Date.now();
    const client = new TelltaleClient("http://127.0.0.1:9", server.key, {
      retry: { maxAttempts: 3, backoffMs: 50, maxBackoffMs: 100 },
      timeoutMs: 2_000,
    });
    await assert.rejects(client.context(), (error: TelltaleError) => error.status === undefined);
    assert.ok(Date.now() - started < 5_000);
  });
});

describe("a storm of 429s", () => {
  const limit = 60;
  let server: Server;
  before(async () => {
    server = await Server.start("--api-rate-per-minute", String(limit));
  });
  after(async () => server.stop());

  test("is ridden out without an error and within the limit", async () => {
    const accepted: number[] = [];
    let refused = 0;
    const client = new TelltaleClient(server.url, server.key, {
      onResponse: (status) => (status === 429 ? (refused += 1) : accepted.push(Date.now())),
    });
    for (let i = 0; i < limit + 10; i++) await client.context();
    await Promise.all(Array.from({ length: 10 }, () => client.context()));
    assert.equal(accepted.length, limit + 20);
    assert.ok(refused > 0 && refused <= 2 * 20 + 10, `${refused} refusals`);
    accepted.forEach((start, index) => {
      // Client-side times lag the server's by each response's latency: 100 ms of slack.
      const inWindow = accepted.slice(index).filter((t) => t < start + 59_900).length;
      assert.ok(inWindow <= limit, `${inWindow} accepted within a minute`);
    });
  });
});

test("what is retried", () => {
  const policy = { ...DEFAULT_RETRY, maxAttempts: 3, backoffMs: 1000 };
  const jitter = () => 1;
  assert.equal(retryWait(policy, 429, "7", 1, 0, jitter), 7000);
  assert.equal(retryWait(policy, 429, "7", 9, 0, jitter), 7000);
  assert.equal(retryWait(policy, 429, "7", 1, 299_000, jitter), undefined);
  assert.equal(retryWait(policy, 503, null, 1, 0, jitter), 1000);
  // A 503's Retry-After is waited out when longer than the backoff, and spends an attempt.
  assert.equal(retryWait(policy, 503, "5", 1, 0, jitter), 5000);
  assert.equal(retryWait(policy, 503, "0", 2, 0, jitter), 2000);
  assert.equal(retryWait(policy, 503, "999", 1, 0, jitter), 60_000);
  assert.equal(retryWait(policy, 503, "5", 3, 0, jitter), undefined);
  assert.equal(retryWait(policy, 500, null, 2, 0, jitter), 2000);
  assert.equal(retryWait(policy, 502, null, 3, 0, jitter), undefined);
  for (const status of [400, 401, 404, 409, 413]) assert.equal(retryWait(policy, status, null, 1, 0, jitter), undefined);
  assert.equal(retryWait(policy, undefined, null, 1, 0, jitter), 1000);
});
