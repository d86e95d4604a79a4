import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type { BackendRequest } from '../stage-backend.js';

/** Which Claude session an attempt runs in, and what it tells the agent on stdin. */
export interface SessionPlan {
  sessionId: string;
  /** `--resume sessionId` rather than `--session-id sessionId`. */
  resume: boolean;
  /** The prompt, sent on stdin (never on the command line: Linux limits one argument to 128 KiB). */
  stdin: string;
  warnings: string[];
}

/** What a resumed attempt is told when the previous one was cut short (worker gone, stall, crash). */
export function interruptedPrompt(attempt: number): string {
  return [
    `Your previous attempt at this task (attempt ${attempt - 1}) was interrupted before it finished.`,
    'Continue where you left off: check the working directory for work already done, finish what is missing,',
    'and end with the fenced JSON report block as instructed.',
  ].join(' ');
}

/** What an agent resuming its session is told when its workspace was restored from a checkpoint taken at `takenAt`. */
export function restoredNote(takenAt: string): string {
  return [
    `Note: the machine this task ran on was lost; your workspace and this conversation were restored from a checkpoint taken at ${takenAt}.`,
    'Changes made after that time may be missing: check the working directory before you rely on earlier work.',
  ].join(' ');
}

/**
 * Decides the session of an attempt. The previous attempt's session (from its last heartbeat) is
 * resumed first; else a continuation's session (a person's answer, granted tools, rework feedback)
 * is resumed with its message; else the task starts in a new session. A session that cannot be
 * found under the run's `CLAUDE_CONFIG_DIR` is not resumed: the attempt starts afresh, with a warning.
 */
export async function planSession(request: BackendRequest): Promise<SessionPlan> {
  const { continuation, resumeSessionId, workspace, prompt } = request;
  const warnings: string[] = [];
  for (const candidate of new Set([resumeSessionId, continuation?.sessionId])) {
    if (!candidate) continue;
    if (await sessionExists(workspace.claudeConfigDir, candidate)) {
      const message = continuation?.message ?? interruptedPrompt(request.attempt);
      const stdin = request.restoredFrom ? `${restoredNote(request.restoredFrom.takenAt)}\n\n${message}` : message;
      return { sessionId: candidate, resume: true, stdin, warnings };
    }
    warnings.push(`session ${candidate} could not be found under ${workspace.claudeConfigDir}, so it was not resumed; the attempt started a new session`);
  }
  const stdin = continuation ? `${prompt.user}\n\n${continuation.message}` : prompt.user;
  return { sessionId: randomUUID(), resume: false, stdin, warnings };
}

/** The CLI stores a session as `<config>/projects/<encoded cwd>/<id>.jsonl`. */
export async function sessionExists(claudeConfigDir: string, sessionId: string): Promise<boolean> {
  const projects = path.join(claudeConfigDir, 'projects');
  let folders: string[];
  try {
    folders = await readdir(projects);
  } catch {
    return false;
  }
  return folders.some((folder) => existsSync(path.join(projects, folder, `${sessionId}.jsonl`)));
}
