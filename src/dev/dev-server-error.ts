/** Machine-readable reasons {@link DevServerError} carries in `code`. */
export const DevServerErrorCode = {
  /** Another program holds the gRPC or UI port. */
  PORT_IN_USE: 'DEV_SERVER_PORT_IN_USE',
  /** A Temporal server already answers on the gRPC port. */
  ALREADY_RUNNING: 'DEV_SERVER_ALREADY_RUNNING',
  /** Another live dev server holds the SQLite file (`<dbFile>.lock` names its process). */
  DB_IN_USE: 'DEV_SERVER_DB_IN_USE',
  /** The server process exited before it was ready. */
  EXITED: 'DEV_SERVER_EXITED',
  /** `port` or `uiPort` is not a TCP port number. */
  INVALID_PORT: 'DEV_SERVER_INVALID_PORT',
  /** The server did not answer within `readyTimeoutMs`. */
  NOT_READY: 'DEV_SERVER_NOT_READY',
  /** A search attribute in `dbFile` has another type than the project defines. */
  SEARCH_ATTRIBUTE_CONFLICT: 'DEV_SERVER_SEARCH_ATTRIBUTE_CONFLICT',
} as const;
export type DevServerErrorCode = (typeof DevServerErrorCode)[keyof typeof DevServerErrorCode];

/** Thrown when the dev server cannot be started; `details` holds the tail of the server log when there is one. */
export class DevServerError extends Error {
  constructor(
    readonly code: DevServerErrorCode,
    message: string,
    readonly details?: string,
  ) {
    super(`[${code}] ${message}`);
    this.name = 'DevServerError';
  }
}
