import type { ApiKeyLimiter, ThrottledWait } from '../../api-key/key-limiter.js';
import { quietHeartbeatIntervalMs, type AttemptProgress, type BackendOutcome, type BackendRequest } from '../stage-backend.js';

/**
 * Runs a CLI attempt under the worker's API key limits (the agent is given the key as ANTHROPIC_API_KEY): the agent
 * starts once the key's pause is over and it holds one of the key's `concurrentRequests` slots, which it keeps until
 * the attempt ends. While it waits the attempt heartbeats, says what it waits for, and spends nothing.
 */
export async function withAgentSlot(limiter: ApiKeyLimiter | undefined, request: BackendRequest, run: () => Promise<BackendOutcome>): Promise<BackendOutcome> {
  if (!limiter) return run();
  const doneWithKey = limiter.use();
  try {
    const release = await waitForSlot(limiter, request);
    try {
      return await run();
    } finally {
      await release();
    }
  } finally {
    doneWithKey();
  }
}

async function waitForSlot(limiter: ApiKeyLimiter, request: BackendRequest): Promise<() => Promise<void>> {
  let throttled: ThrottledWait | undefined;
  // Keeps the session a retry resumes: the heartbeat's details are what the next attempt reads.
  const beat = (): void => {
    const progress: AttemptProgress = { sessionId: request.resumeSessionId, turns: 0, costUsd: 0, lastEventAt: Date.now() };
    request.heartbeat(throttled ? { ...progress, throttled } : progress);
  };
  const keepAlive = setInterval(beat, quietHeartbeatIntervalMs(request.stage));
  try {
    return await limiter.acquire(
      request.signal,
      (wait) => {
        throttled = wait;
        if (wait) beat();
      },
      { agent: true, label: `agent of stage ${request.stage.id}` },
    );
  } finally {
    clearInterval(keepAlive);
  }
}
