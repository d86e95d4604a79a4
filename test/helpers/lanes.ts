/**
 * Tests of a file that share one harness (its worker, its model server's requests) one at a time, while tests of
 * other harnesses run beside them: mark the tests `concurrent` and run each one's body in its lane.
 */
export class Lane<T> {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly resource: () => T) {}

  /** Runs `body` once every test queued before it in this lane has ended, however it ended. */
  run<R>(body: (resource: T) => Promise<R>): Promise<R> {
    const result = this.tail.then(() => body(this.resource()));
    this.tail = result.catch(() => undefined);
    return result;
  }
}
