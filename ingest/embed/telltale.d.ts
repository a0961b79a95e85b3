// Types of Telltale's browser embed: the script build sets `window.Telltale`; the ES module
// exports the same object as `Telltale` and as its default export.

export interface TelltaleStartOptions {
  /** The survey's public tracking key (24 hex characters). */
  trackingKey: string;
  /** The browser-session identifier (1-128 of `A-Za-z0-9._:-`); defaults to `interviewId`. */
  sessionId?: string;
  /** The response UUID the integrator looks the session up by. */
  interviewId?: string;
  /** The collector's address from provisioning (`collectorApiUrl`). */
  collectorApiUrl: string;
}

/** Counts of this page's events; never their content. */
export interface TelltaleStats {
  produced: number;
  accepted: number;
  dropped: number;
  queued: number;
}

export interface TelltaleEmbed {
  readonly version: string;
  /** Starts capture; false when the options are unusable (the page is unaffected either way). */
  start(options: TelltaleStartOptions): boolean;
  /** Stops capture and sends what is queued. */
  stop(): void;
  /** Counts since `start`, or null before it. */
  stats(): TelltaleStats | null;
  /** Sends what is queued now. */
  flush(): void;
}

export declare const Telltale: TelltaleEmbed;
export default Telltale;

declare global {
  interface Window {
    Telltale?: TelltaleEmbed;
  }
}
