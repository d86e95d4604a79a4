/** One request the server received, as `ModelServer.requests()` and `GET /_scenario/requests` return it. */
export interface RecordedRequest {
  /** 0-based arrival order since the last reset. */
  seq: number;
  /** @format ISO 8601 */
  time: string;
  method: string;
  /** Path without the query string, e.g. `/v1/messages`. */
  path: string;
  /** The query string without `?`, e.g. `beta=true`; empty when none. */
  query: string;
  /** Request headers; `x-api-key`, `authorization` and cookies are replaced by `<redacted>`. */
  headers: Record<string, string>;
  /** The parsed JSON body, or `undefined` when there was none or it was not JSON. */
  body: unknown;
  /** The HTTP status the server answered with. */
  status: number;
  /** What the server did with the request. */
  outcome: 'reply' | 'scripted-error' | 'no-match' | 'exhausted' | 'rejected' | 'count-tokens' | 'not-found' | 'rate-limited';
  /** For `/v1/messages`: the rule chosen (`fallback` for the fallback turn). */
  rule?: string;
  /** For `/v1/messages`: the conversation's turn index (assistant messages so far). */
  turn?: number;
}

/** What is known of a request before the server answers it. */
export type RequestBase = Omit<RecordedRequest, 'seq' | 'time' | 'status' | 'outcome'>;

/** The requests the scripted model server received, numbered in arrival order; only the newest are kept. */
export class RequestLog {
  private records: RecordedRequest[] = [];
  private nextSeq = 0;

  /** @param maxRecorded how many requests are kept; older ones are dropped */
  constructor(private readonly maxRecorded: number) {}

  add(entry: Omit<RecordedRequest, 'seq' | 'time'>): void {
    this.records.push({ seq: this.nextSeq++, time: new Date().toISOString(), ...entry });
    if (this.records.length > this.maxRecorded) this.records.splice(0, this.records.length - this.maxRecorded);
  }

  /** The kept requests, oldest first, without copying them (to serialise them). */
  list(): readonly RecordedRequest[] {
    return this.records;
  }

  /** A copy of the kept requests, oldest first, that the caller may change. */
  copy(): RecordedRequest[] {
    return this.records.map((r) => ({ ...r }));
  }

  /** Forgets every request and numbers the next one 0 again. */
  clear(): void {
    this.records = [];
    this.nextSeq = 0;
  }
}
