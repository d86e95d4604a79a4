/**
 * How `work` settled, or undefined when it had not within `ms`: for a question whose slow answer must not hold up the
 * asker (a store that does not answer). `work` goes on; its late outcome is observed, so a late rejection is handled.
 */
export async function settledWithin<T>(work: Promise<T>, ms: number): Promise<PromiseSettledResult<T> | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([Promise.allSettled([work]).then(([outcome]) => outcome), late]);
  } finally {
    clearTimeout(timer);
  }
}
