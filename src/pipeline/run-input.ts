import { z } from 'zod';
import { formatPath } from './errors.js';
import { findRunIdProblem } from './run-id.js';
import { findGraphProblems } from './graph.js';
import { findUnknownBackends } from './backend-names.js';
import { describeIssues } from './issue-messages.js';
import { pipelineSchema } from './schema.js';
import type { RunInputProblem } from './run-input-problems.js';
import { findSemanticProblems } from './semantic-checks.js';
import { findLocalHosts, localHostMessage } from './local-hosts.js';
import { objectInputNames, parseObjectInput } from './object-inputs.js';
import { fillStageOptions } from './stage-option-inputs.js';

/*
 * What starts a run, checked by the workflow itself at its first task. Our client validated the file, but Temporal's
 * own CLI, another language's SDK or a library can start `pipelineWorkflow` with anything; a bad input must fail the
 * run at once, naming the problems, not throw in the workflow task (retried forever: a run "running" for ever) nor
 * fail a stage late in an activity. Pure and deterministic: the same input gives the same problems on every replay.
 */

/** The shape of the run input this code reads. A run input without `version` is read as this one. */
export const RUN_INPUT_VERSION = 1;

/**
 * The run input, as the workflow receives it. Strict: a field this code does not know is a problem (a typo, or a
 * client newer than the worker). A change that adds a field adds it here.
 */
export const runInputSchema = z.strictObject({
  /** The shape of this input; absent in runs started before it existed, read as {@link RUN_INPUT_VERSION}. */
  version: z.number().optional(),
  pipeline: pipelineSchema,
  /** Absolute folder of the pipeline file; agent, prompt and context paths resolve against it. */
  baseDir: z.string().min(1),
  /** The pipeline file as the user named it, for messages. */
  pipelineFile: z.string().min(1),
  inputs: z.record(z.string(), z.string()),
  /**
   * Backend names besides the built-in ones that the run may use (backends a worker registers). A client that knows
   * the workers' backends lists them here; the workflow then accepts stages that name them.
   */
  backends: z.array(z.string().min(1)).optional(),
  /** The files the run carries (see `run-bundle.ts`); their hashes are checked by the worker that unpacks them. */
  bundle: z
    .strictObject({
      hash: z.string().min(1),
      pipelineDir: z.string(),
      files: z.record(z.string(), z.string()),
      blobs: z.record(z.string(), z.strictObject({ encoding: z.enum(['utf8', 'base64']), data: z.string() })),
    })
    .optional(),
  /** The client's signature (contracts/trust-types.ts); checked against the worker's trusted keys before this check. */
  signature: z
    .strictObject({ keyId: z.string(), nonce: z.string(), expiresAt: z.number(), schedule: z.boolean().optional(), value: z.string() })
    .optional(),
  /** A fork (contracts/run-fork.ts): the source run, the stage, and whether changed definitions are taken over. */
  fork: z.strictObject({ runId: z.string().min(1), stage: z.string().min(1).optional(), force: z.boolean().optional() }).optional(),
});

/** Options of {@link findRunInputProblems}. */
export interface RunInputCheckOptions {
  /** Backend names accepted besides the built-in ones and the input's own `backends`. */
  backends?: readonly string[];
  /**
   * The run (workflow) id, checked as `start` checks it: `.`, `..` and empty would name a folder, not a run. A leading
   * "-", which clients refuse too, is let through here (see findNewRunIdProblem).
   */
  runId?: string;
  /**
   * Accept loopback and link-local hosts in `sandbox.allowedDomains` (the worker's AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL).
   * @default false: a raw start skips our client's `validate`, so the worker refuses them itself
   */
  allowLocalHosts?: boolean;
}

/**
 * Every problem of a run input: its version, the schema, the stage graph and the semantic checks `validate` runs
 * (file checks aside: a workflow reads no files). An empty list means the workflow may run it.
 */
export function findRunInputProblems(input: unknown, options: RunInputCheckOptions = {}): RunInputProblem[] {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return [{ path: '', message: `the run input must be an object {version, pipeline, baseDir, pipelineFile, inputs}; got ${describe(input)}` }];
  }
  const runIdProblem = options.runId === undefined ? undefined : findRunIdProblem(options.runId);
  if (runIdProblem) return [{ path: '(run id)', message: runIdProblem }];
  const version = (input as { version?: unknown }).version;
  if (version !== undefined && version !== RUN_INPUT_VERSION) {
    return [{ path: 'version', message: `unknown run input version ${JSON.stringify(version)}; this worker reads version ${RUN_INPUT_VERSION} (start the run with a client of the same release as the worker)` }];
  }
  const parsed = runInputSchema.safeParse(input, { reportInput: true });
  // Described as `validate` describes them: the value, and what is allowed instead.
  if (!parsed.success) return describeIssues(runInputSchema, parsed.error.issues).map((issue) => ({ path: formatPath(issue.path), message: issue.message }));
  const pipeline = parsed.data.pipeline;
  const inPipeline = (problems: { path: PropertyKey[]; message: string }[]): RunInputProblem[] =>
    problems.map((p) => ({ path: formatPath(['pipeline', ...p.path]), message: p.message }));
  // The schema takes any backend name; which ones exist is known only here: the built-in ones, the input's and the worker's.
  const known = [...(parsed.data.backends ?? []), ...(options.backends ?? [])];
  const backends = inPipeline(findUnknownBackends(pipeline, known, { clientHint: false }));
  if (backends.length > 0) return backends;
  // Semantic checks walk the stage graph, so they run only once it is sound (as in `parsePipeline`).
  const graph = inPipeline(findGraphProblems(pipeline.stages));
  if (graph.length > 0) return graph;
  const semantic = inPipeline(findSemanticProblems(pipeline));
  if (semantic.length > 0) return semantic;
  const local = options.allowLocalHosts ? [] : inPipeline(findLocalHosts(pipeline).map((entry) => ({ path: entry.path, message: localHostMessage(entry) })));
  if (local.length > 0) return local;
  const objects = findObjectInputProblems(pipeline.inputs, parsed.data.inputs);
  if (objects.length > 0) return objects;
  // Options given as `{{inputs.NAME}}` (model, timeout…) are filled now: a value they cannot take fails the run at once.
  return inPipeline(fillStageOptions(pipeline, parsed.data.inputs).problems);
}

/** Inputs declared `type: object` whose value is not the JSON of such an object (a client that skipped our checks). */
function findObjectInputProblems(declared: Parameters<typeof objectInputNames>[0], inputs: Record<string, string>): RunInputProblem[] {
  return objectInputNames(declared).flatMap((name) => {
    if (!Object.hasOwn(inputs, name)) return [];
    const parsed = parseObjectInput(inputs[name]);
    return 'problem' in parsed ? [{ path: formatPath(['inputs', name]), message: `input "${name}" is \`type: object\`, but ${parsed.problem}` }] : [];
  });
}


function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
