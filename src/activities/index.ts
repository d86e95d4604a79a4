import type { PipelineActivities } from '../contracts/activities.js';
import { runAnthropicApi, type AnthropicApiOptions } from './backends/anthropic-api/backend.js';
import { workerSecretValues } from './backends/claude-cli/agent-auth.js';
import { runClaudeCli } from './backends/claude-cli/backend.js';
import type { ClaudeCliOptions } from './backends/claude-cli/backend-options.js';
import { runCommand, type CommandOptions } from './backends/command/backend.js';
import { allowedCommandEnv, commandSecretValues } from './backends/command/command-env.js';
import { COMMAND_BACKEND } from '../pipeline/command-stage.js';
import { withAgentSlot } from './backends/claude-cli/key-slot.js';
import { createCheckRunInput } from './check-run-input.js';
import { sandboxAllowLocalFromEnv } from '../config.js';
import { createTrustActivities } from './check-trust.js';
import { TRUST_EVERYONE, trustSecretValues, type WorkerTrust } from '../trust/worker-trust.js';
import { createCloseWorkspace } from './close-workspace.js';
import { createDeliverRun } from './deliver-run.js';
import { createMergeStage } from './merge-stage.js';
import { createRunStage } from './run-stage.js';
import { closedRuns } from './leases/closed-runs.js';
import { acquireRunLeases, releaseRunLeases } from './leases/run-leases.js';
import { withStageLeases } from './leases/stage-leases.js';
import type { StageBackend } from './backends/stage-backend.js';
import type { SecretRegistry } from './secrets.js';
import type { ObjectStore } from '../store/object-store.js';
import type { AllowedPaths } from './workspace/allowed-paths.js';
import type { PipelineDirs } from './prompt/worker-files.js';
import type { CheckpointOptions } from './checkpoint/settings.js';
import { createOwnerActivities, type OwnerSettings } from './owner/run-owner.js';
import { checkpointElsewhere } from './checkpoint/restore-checkpoint.js';
import { createPrepareFork } from './fork/prepare-fork.js';

/** What the activities are built from: settings, and the objects a worker makes once and its activities share. */
export interface ActivityDependencies {
  /** Folder under which each run gets its workspace; shared storage when several hosts run workers. */
  workspacesRoot: string;
  /** The worker's secrets, kept out of everything the activities report; the keys of `cli` and `api` are added. */
  secrets: SecretRegistry;
  cli: ClaudeCliOptions;
  api: AnthropicApiOptions;
  /** Backends besides the built-in ones, by the name a stage's `backend:` selects. */
  extraBackends?: Record<string, StageBackend>;
  /** Host folders runs may name in `workspace.repo` and `addDirs` besides the workspaces root (`AGENT_PIPELINE_ALLOWED_PATHS`). */
  allowedPaths: AllowedPaths;
  /**
   * Host folders from which runs that carry no files (`--files-from-worker`) may have their pipeline files read
   * (`AGENT_PIPELINE_PIPELINE_DIRS`). @default none: every such run is refused
   */
  pipelineDirs?: PipelineDirs;
  /** Where and how often runs are checkpointed (checkpoint/settings.ts). @default none: no checkpoint is taken or restored */
  checkpoints?: CheckpointOptions;
  /**
   * Where runs keep what outlives the machine (checkpoints, claimed payloads, whole final answers): `AGENT_PIPELINE_STORE`, encrypting when
   * a key is set (store/open-store.ts). @default none: nothing is checkpointed
   */
  store?: ObjectStore;
  /** The keys whose runs and decisions the worker accepts (src/trust/worker-trust.ts). @default every run and decision */
  trust?: WorkerTrust;
  /** How often a run waiting for a pipeline-level key reports its place. @unit milliseconds @default RUN_LEASE_POLL_MS */
  leasePollMs?: number;
  /**
   * This worker's own task queues, which runs it claims send their stages to (one owner per run). @default none: a
   * claim keeps the run on the shared queue
   */
  owner?: OwnerSettings;
}

/** The worker's activities, closed over their dependencies (Temporal's dependency-injection pattern). */
export function createActivities(deps: ActivityDependencies): PipelineActivities {
  const { secrets } = deps;
  // The keys never appear in failures, results or the transcripts the activities write.
  // Every secret the worker holds, whatever its agents are given: the agents' credentials, GH_TOKEN, TEMPORAL_API_KEY,
  // OpenTelemetry headers, anything named like a credential (workerSecretValues).
  secrets.register([...workerSecretValues(deps.cli.env), ...commandSecretValues(deps.cli.env), ...trustSecretValues(deps.cli.env), deps.api.client?.apiKey ?? undefined]);
  // Each activity runs with the worker's secrets, which the failures and results it builds are redacted with.
  const withSecrets =
    <A extends unknown[], R>(activity: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      secrets.run(() => activity(...args));
  // Stage attempts running now: a worker with no free slot lets another one claim a new run.
  let running = 0;
  const counted =
    <A extends unknown[], R>(activity: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      running += 1;
      try {
        return await activity(...args);
      } finally {
        running -= 1;
      }
    };
  const trust = deps.trust ?? TRUST_EVERYONE;
  const pipelineDirs = deps.pipelineDirs ?? [];
  const { checkRunTrust, verifyDecision } = createTrustActivities(trust, pipelineDirs);
  // Whether `AGENT_PIPELINE_SANDBOX=permissive` honours a stage's `sandbox: false` in unsigned runs too: decided by the
  // same key list that checks the runs' signatures, so the two can never disagree. Its agents may not read the root's
  // other runs nor the worker's reserved folder there (agent-reads.ts).
  const cli: ClaudeCliOptions = { ...deps.cli, signedRunsOnly: trust.runKeys.size > 0, workspacesRoot: deps.cli.workspacesRoot ?? deps.workspacesRoot };
  // Command stages run in the sandbox the agents' Bash gets, decided by the same settings.
  const { env, killGraceMs, sandbox, sandboxHost, signedRunsOnly, workspacesRoot } = cli;
  const command: CommandOptions = { env, allowedEnv: allowedCommandEnv(env), killGraceMs, sandbox, sandboxHost, signedRunsOnly, workspacesRoot };
  return {
    checkRunInput: withSecrets(createCheckRunInput({ allowLocalHosts: sandboxAllowLocalFromEnv(deps.cli.env) })),
    checkRunTrust: withSecrets(checkRunTrust),
    verifyDecision: withSecrets(verifyDecision),
    // A stage with `limits:` holds its keys while an attempt runs; without, the stage runs as it did.
    runStage: counted(withSecrets(withStageLeases(
      createRunStage({
        workspacesRoot: deps.workspacesRoot,
        allowedPaths: deps.allowedPaths,
        pipelineDirs,
        checkpoints: deps.checkpoints,
        store: deps.store,
        backends: {
          ...deps.extraBackends,
          // The agents are given the worker's ANTHROPIC_API_KEY, so they count against its shared limits too.
          'claude-cli': (request) => withAgentSlot(deps.cli.env.ANTHROPIC_API_KEY ? deps.api.limiter : undefined, request, () => runClaudeCli(request, cli)),
          'anthropic-api': (request) => runAnthropicApi(request, deps.api),
          // After the registered ones: a stage with `run:` always runs the worker's own command runner.
          [COMMAND_BACKEND]: (request) => runCommand(request, command),
        },
      }),
    ))),
    acquireRunLeases: (input) => acquireRunLeases(input, deps.leasePollMs),
    releaseRunLeases,
    // For the lease workflows: a run terminated while it held a key for its life loses it.
    closedRuns,
    // The worker's environment (the agents' too): its PATH finds `gh`, its GH_TOKEN authenticates it.
    deliverRun: withSecrets(createDeliverRun({ workspacesRoot: deps.workspacesRoot, allowedPaths: deps.allowedPaths, env: deps.cli.env })),
    closeWorkspace: withSecrets(createCloseWorkspace({ workspacesRoot: deps.workspacesRoot })),
    mergeStage: withSecrets(createMergeStage({ workspacesRoot: deps.workspacesRoot })),
    ...createOwnerActivities(deps.owner, () => running, (run) => (deps.checkpoints ? checkpointElsewhere(deps.checkpoints, deps.workspacesRoot, run) : Promise.resolve(undefined))),
    // A fork's first step reads its source's checkpoints from the store this worker checkpoints to.
    prepareFork: withSecrets(createPrepareFork({ workspacesRoot: deps.workspacesRoot, allowedPaths: deps.allowedPaths, trust, store: deps.checkpoints?.store })),
  };
}
