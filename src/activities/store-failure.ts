/*
 * The store's errors cross module copies (source and dist) and arrive wrapped (a query whose answer could not be
 * decoded): they are recognised by name along the cause chain, as failures are compared by type, not `instanceof`.
 */

/** The StoreUnavailableError in `err` or its causes, if any. */
export function storeUnavailableIn(err: unknown): Error | undefined {
  for (let current = err, depth = 0; current instanceof Error && depth < 10; current = current.cause, depth += 1) {
    if (current.name === 'StoreUnavailableError') return current;
  }
  return undefined;
}
