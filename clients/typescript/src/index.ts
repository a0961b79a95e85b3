// Telltale's integration API for a survey platform's server (Node 18+, or any runtime with
// `fetch`). The integration key is a secret: never ship this client to a browser.
//
// Types come from the service's OpenAPI document (`npm run generate` writes `src/schema.ts` from
// `openapi.json`, which the tests compare with what the real binary serves). Behaviour matches
// the Python client (`clients/python`): lookup of any number of references, 100 per request;
// runs and deletions waited for with bounded polling; retries of transient failures only (429
// after its `Retry-After`, 5xx, timeouts, connection errors); a timeout on every call.

import type { components } from "./schema.js";

type Schemas = components["schemas"];
export type IntegrationContext = Schemas["IntegrationContext"];
export type ProvisionedSurvey = Schemas["ProvisionResult"];
export type SessionRow = Schemas["LookupRow"];
export type ScoringRun = Schemas["ScoringRunView"];
export type ScoringFailure = Schemas["ScoringFailureView"];
export type SessionDeletion = Schemas["SessionDeletionView"];
export type SessionEvidence = Schemas["SessionEvidence"];
export type SurveySummary = Schemas["SurveySummary"];
export type DeskSession = Schemas["DeskSessionView"];
export type SessionsPage = Schemas["DeskSessionsEnvelope"];
export type Link = Schemas["EvidenceLink"];

/** The desk list's filters (`GET .../summary/sessions`). */
export interface SessionFilters {
  band?: "automation-like" | "review" | "human-like";
  /** A summary cluster's `id`. */
  cluster?: string;
  /** `asc` (lowest score first, the default) or `desc`. */
  order?: "asc" | "desc";
}

/** One page of the list: the filters, its size (1 to 1000) and the previous page's `next`. */
export interface PageOptions extends SessionFilters {
  limit?: number;
  after?: string;
}

/** References per lookup request (the API's limit). */
export const LOOKUP_CHUNK = 100;

/** What is retried and for how long (see the module comment). */
export interface RetryPolicy {
  /** Tries in all for 5xx, timeouts and connection errors (default 5). */
  maxAttempts: number;
  /** First back-off in ms, doubled per try up to `maxBackoffMs`, with jitter (default 500). */
  backoffMs: number;
  maxBackoffMs: number;
  /** Longest `Retry-After` honoured at once, in ms (default 60 000). */
  maxRetryAfterMs: number;
  /** Total time a call may spend waiting out 429s, in ms (default 300 000); 429s spend no attempts. */
  rateLimitedPatienceMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 5,
  backoffMs: 500,
  maxBackoffMs: 8_000,
  maxRetryAfterMs: 60_000,
  rateLimitedPatienceMs: 300_000,
};

export interface ClientOptions {
  /** Per-request timeout in ms (default 10 000). */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Called with each response's status (counting, logging). */
  onResponse?: (status: number, method: string, path: string) => void;
  fetch?: typeof fetch;
}

/** A call that did not succeed: `status` (undefined for a connection failure) and the message. */
export class TelltaleError extends Error {
  constructor(
    readonly status: number | undefined,
    message: string,
  ) {
    super(status === undefined ? message : `${status}: ${message}`);
    this.name = "TelltaleError";
  }
}

/** A run or deletion still unfinished at the caller's deadline. */
export class WaitTimeout extends TelltaleError {
  constructor(message: string) {
    super(undefined, message);
    this.name = "WaitTimeout";
  }
}

const HEX24 = /^[a-fA-F0-9]{24}$/;
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

function surveyPath(surveyId: string): string {
  if (!HEX24.test(surveyId)) throw new TypeError(`${JSON.stringify(surveyId)} is not a survey id (24 hex characters)`);
  return `/integrations/v1/surveys/${surveyId}`;
}

function checkReference(reference: string): string {
  if (!UUID.test(reference)) throw new TypeError(`${JSON.stringify(reference)} is not a UUID`);
  return reference;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * How long to wait before trying again, or undefined to give up. `status` is undefined for a
 * timeout or connection failure.
 */
export function retryWait(
  policy: RetryPolicy,
  status: number | undefined,
  retryAfter: string | null,
  attempt: number,
  rateLimitedForMs: number,
  jitter: () => number = Math.random,
): number | undefined {
  // The delay form of `Retry-After`, in ms, within the policy's cap.
  const retryAfterMs = (fallback: number) => {
    const seconds = Number(retryAfter ?? Number.NaN);
    return Math.min(Math.max(Number.isFinite(seconds) ? seconds * 1000 : fallback, 0), policy.maxRetryAfterMs);
  };
  if (status === 429) {
    const wait = retryAfterMs(1000);
    return rateLimitedForMs + wait > policy.rateLimitedPatienceMs ? undefined : wait;
  }
  if (attempt >= policy.maxAttempts) return undefined;
  if (status !== undefined && status < 500) return undefined;
  const base = Math.min(policy.backoffMs * 2 ** (attempt - 1), policy.maxBackoffMs);
  // A 503 says when the service expects to be back (a catalog restart, a collector catching
  // up): sooner would only fail again.
  return Math.max(base * (0.5 + jitter() / 2), retryAfterMs(0));
}

export class TelltaleClient {
  private readonly base: string;
  private readonly policy: RetryPolicy;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(
    baseUrl: string,
    private readonly key: string,
    private readonly options: ClientOptions = {},
  ) {
    if (!key.startsWith("tt_")) throw new TypeError("an integration key starts with tt_");
    this.base = baseUrl.replace(/\/+$/, "");
    this.policy = { ...DEFAULT_RETRY, ...options.retry };
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** The `data` of a JSON answer. */
  private call<T>(method: string, path: string, body?: unknown): Promise<T> {
    return this.request(method, path, body, (status, text) => {
      try {
        return (JSON.parse(text) as { data: T }).data;
      } catch {
        throw new TelltaleError(status, "the answer is not a {\"data\": ...} envelope");
      }
    });
  }

  private async request<T>(
    method: string,
    path: string,
    body: unknown,
    read: (status: number, text: string) => T,
    accept = "application/json",
  ): Promise<T> {
    let attempt = 0;
    let rateLimitedFor = 0;
    for (;;) {
      attempt += 1;
      let status: number | undefined;
      let retryAfter: string | null = null;
      let failure: string;
      try {
        const response = await this.fetch(this.base + path, {
          method,
          headers: {
            Authorization: `Bearer ${this.key}`,
            Accept: accept,
            ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        status = response.status;
        this.options.onResponse?.(status, method, path);
        const text = await response.text();
        if (status < 400) return read(status, text);
        retryAfter = response.headers.get("Retry-After");
        failure = errorMessage(text) ?? response.statusText;
      } catch (error) {
        if (error instanceof TelltaleError) throw error;
        status = undefined;
        failure = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      }
      const wait = retryWait(this.policy, status, retryAfter, attempt, rateLimitedFor);
      if (wait === undefined) throw new TelltaleError(status, failure);
      if (status === 429) {
        rateLimitedFor += wait;
        attempt -= 1;
      }
      await sleep(wait);
    }
  }

  /** The key's organization, prefix, label and scopes (the check that a key works). */
  context(): Promise<IntegrationContext> {
    return this.call("GET", "/integrations/v1/context");
  }

  /** Creates the survey for your own id, or renames it: the same id gives the same survey. */
  provisionSurvey(externalSurveyId: string, name: string): Promise<ProvisionedSurvey> {
    if (externalSurveyId.length < 1 || externalSurveyId.length > 200) {
      throw new TypeError("an external survey id has 1 to 200 characters");
    }
    return this.call("PUT", `/integrations/v1/surveys/${encodeURIComponent(externalSurveyId)}`, { name });
  }

  /** One row per reference, in order, however many (sent 100 per request). */
  async lookup(surveyId: string, references: readonly string[]): Promise<SessionRow[]> {
    const path = `${surveyPath(surveyId)}/sessions/lookup`;
    references.forEach(checkReference);
    const rows: SessionRow[] = [];
    for (let start = 0; start < references.length; start += LOOKUP_CHUNK) {
      const chunk = references.slice(start, start + LOOKUP_CHUNK);
      rows.push(...(await this.call<SessionRow[]>("POST", path, { externalReferences: chunk })));
    }
    return rows;
  }

  /** Starts a run, or returns the survey's active one; returns at once. */
  startScoringRun(surveyId: string, force = false): Promise<ScoringRun> {
    return this.call("POST", `${surveyPath(surveyId)}/scoring-runs`, { force });
  }

  scoringRun(surveyId: string, runId: string): Promise<ScoringRun> {
    if (!HEX24.test(runId)) throw new TypeError(`${JSON.stringify(runId)} is not a run id`);
    return this.call("GET", `${surveyPath(surveyId)}/scoring-runs/${runId}`);
  }

  /**
   * Starts a run and polls it every `pollIntervalMs` until it is no longer running; rejects with
   * `WaitTimeout` after `timeoutMs`. A failed run is returned (its `error` and `failures` say why).
   */
  async scoreAndWait(
    surveyId: string,
    { force = false, pollIntervalMs = 1_000, timeoutMs = 600_000 } = {},
  ): Promise<ScoringRun> {
    let run = await this.startScoringRun(surveyId, force);
    const deadline = Date.now() + timeoutMs;
    while (run.status === "running") {
      if (Date.now() + pollIntervalMs > deadline) {
        throw new WaitTimeout(`scoring run ${run.id} still running after ${timeoutMs} ms`);
      }
      await sleep(pollIntervalMs);
      run = await this.scoringRun(surveyId, run.id);
    }
    return run;
  }

  /**
   * A session's behaviour and the evidence behind its score: its timeline (pointer paths, key
   * rhythm by key class, scrolls, focus, pasted text lengths), environment, latest score with its
   * reasons, and every feature with its contribution and place among the model's TRAIN humans.
   */
  evidence(surveyId: string, reference: string): Promise<SessionEvidence> {
    return this.call("GET", `${surveyPath(surveyId)}/sessions/by-reference/${checkReference(reference)}/evidence`);
  }

  /** Asks for a session's erasure (idempotent); it is `pending` until done. */
  requestDeletion(surveyId: string, reference: string): Promise<SessionDeletion> {
    return this.call("DELETE", `${surveyPath(surveyId)}/sessions/by-reference/${checkReference(reference)}`);
  }

  deletion(surveyId: string, reference: string): Promise<SessionDeletion> {
    return this.call("GET", `${surveyPath(surveyId)}/session-deletions/${checkReference(reference)}`);
  }

  /**
   * The survey at a glance: the latest run, counts per band, a histogram of scores, sessions
   * not scored yet, and the clusters of sessions that behaved alike.
   */
  surveySummary(surveyId: string): Promise<SurveySummary> {
    return this.call("GET", `${surveyPath(surveyId)}/summary`);
  }

  /** One page of the survey's scored sessions in score order; pass `next` as `after`. */
  sessionsPage(surveyId: string, options: PageOptions = {}): Promise<SessionsPage> {
    const path = `${surveyPath(surveyId)}/summary/sessions${query(options)}`;
    return this.request("GET", path, undefined, (status, text) => {
      try {
        return JSON.parse(text) as SessionsPage;
      } catch {
        throw new TelltaleError(status, "the answer is not a page of sessions");
      }
    });
  }

  /** Every scored session the filters select, page after page (1000 a request). */
  async *sessions(surveyId: string, filters: SessionFilters = {}): AsyncGenerator<DeskSession> {
    let after: string | undefined;
    for (;;) {
      const page = await this.sessionsPage(surveyId, { ...filters, limit: 1000, after });
      yield* page.data;
      if (!page.next) return;
      after = page.next;
    }
  }

  /** The list as CSV: every session the filters select, with the list's fields. */
  sessionsCsv(surveyId: string, filters: SessionFilters = {}): Promise<string> {
    const path = `${surveyPath(surveyId)}/summary/sessions.csv${query(filters)}`;
    return this.request("GET", path, undefined, (_, text) => text, "text/csv");
  }

  /** A link to the survey's desk page for a person's browser (1 to 3600 s; 900 by default). */
  createDeskLink(surveyId: string, expiresInSeconds?: number): Promise<Link> {
    const body = expiresInSeconds === undefined ? {} : { expiresInSeconds };
    return this.call("POST", `${surveyPath(surveyId)}/desk-links`, body);
  }

  /** Requests the erasure and polls it until it is no longer pending. */
  async deleteAndWait(
    surveyId: string,
    reference: string,
    { pollIntervalMs = 500, timeoutMs = 300_000 } = {},
  ): Promise<SessionDeletion> {
    let deletion = await this.requestDeletion(surveyId, reference);
    const deadline = Date.now() + timeoutMs;
    while (deletion.status === "pending") {
      if (Date.now() + pollIntervalMs > deadline) {
        throw new WaitTimeout(`deletion of ${reference} still pending after ${timeoutMs} ms`);
      }
      await sleep(pollIntervalMs);
      deletion = await this.deletion(surveyId, reference);
    }
    return deletion;
  }
}

/** The query string of the list's options (those given). */
function query(options: PageOptions): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(options)) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function errorMessage(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: unknown };
    return typeof body.error === "string" ? body.error : undefined;
  } catch {
    return text ? text.slice(0, 200) : undefined;
  }
}
