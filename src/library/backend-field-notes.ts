import type { StageDefinition } from '../pipeline/stage-schema.js';

/*
 * Stage fields only one built-in backend reads (docs/pipeline.md marks them "CLI stages" or "API stages"). A stage
 * that sets one while it runs on the other backend is valid, but the field does nothing there: `validate` says so in a
 * note, as it does for `output:` on a CLI stage. Fields `defaults:` sets are not noted (they apply to the stages of
 * either backend), nor those of a stage whose backend its agent file may choose, nor a backend of the workers' own
 * (it may read any field).
 */

/** The fields only the `claude-cli` backend reads. */
const CLI_ONLY = ['permissionMode', 'allowedTools', 'disallowedTools', 'addDirs', 'fallbackModel', 'bare', 'mcpServers', 'sandbox'] as const;
/** The fields only the `anthropic-api` backend reads (`output` has a note of its own). */
const API_ONLY = ['maxTokens', 'maxContinuations', 'cache'] as const;

/** A note on one field of a stage. */
export interface FieldNote {
  field: string;
  message: string;
}

/**
 * The notes for the fields `stage` sets that its backend ignores. `defaultBackend` is the `defaults:` one; a command
 * stage (`run:`) has fields of its own, checked elsewhere.
 */
export function backendFieldNotes(stage: StageDefinition, defaultBackend: string | undefined): FieldNote[] {
  if (stage.run !== undefined || (stage.agent !== undefined && stage.backend === undefined)) return [];
  const backend = stage.backend ?? defaultBackend ?? 'claude-cli';
  const own = stage as Record<string, unknown>;
  if (backend === 'claude-cli') {
    const notes: FieldNote[] = API_ONLY.filter((f) => own[f] !== undefined).map((field) => ({ field, message: ignored(field, stage.id, 'anthropic-api', backend) }));
    if (stage.output !== undefined) notes.push({ field: 'output', message: 'output: applies to anthropic-api stages; a claude-cli agent writes its own files (list them under expects:)' });
    return notes;
  }
  if (backend === 'anthropic-api') return CLI_ONLY.filter((f) => own[f] !== undefined).map((field) => ({ field, message: ignored(field, stage.id, 'claude-cli', backend) }));
  return [];
}

function ignored(field: string, stageId: string, reader: string, backend: string): string {
  return `${field}: applies to ${reader} stages; stage "${stageId}" runs on ${backend}, which ignores it (remove it, or set \`backend: ${reader}\`)`;
}
