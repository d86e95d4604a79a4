import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The slowest files, slowest first (from .ci/run's report of the ten slowest files; issue 32). Started first, they
 * run beside the many short files instead of alone at the end of the run, where one of the two workers would idle.
 * A name that no longer exists is ignored; a new slow file only costs time until it is added here.
 */
export const SLOW_FILES = [
  // The ten slowest of the last quiet CI run (ci20), slowest first, then the new restore test (~45 s).
  'test/integration/command-stages.test.ts',
  'test/integration/stage-isolation.test.ts',
  'test/integration/fork-rerun.test.ts',
  'test/integration/claude-cli-warm-start.test.ts',
  'test/integration/checkpoint-staging-links.test.ts',
  'test/integration/fifo-swap.test.ts',
  'test/integration/limits-across-runs.test.ts',
  'test/integration/cli-large-runs.test.ts',
  'test/integration/library-pack-types.test.ts',
  'test/integration/system-packages-hidden.test.ts',
  'test/integration/checkpoint-restore-killed.test.ts',
  'test/integration/library-examples.test.ts',
  'test/integration/example-claude-code-runner.test.ts',
  'test/integration/fork-run.test.ts',
  'test/integration/checkpoint-machine-loss-rounds.test.ts',
  'test/integration/workflow-continue-as-new.test.ts',
  // The unit files that type-check (TypeScript in their process: 8–17 s of CPU each). Last, as unit files come, they
  // ran four at once with nothing left to overlap them: the run's last 20 seconds.
  'test/unit/library-types.test.ts',
  'test/unit/library-hover-docs.test.ts',
  'test/unit/layer-rule.test.ts',
  'test/unit/import-graph.test.ts',
  'test/integration/workspace-dir.test.ts',
  'test/integration/claude-cli-stage-timeout.test.ts',
  'test/integration/fault-cancel.test.ts',
  'test/integration/claude-cli-mid-turn-prompts.test.ts',
  'test/integration/fault-worker.test.ts',
  'test/integration/run-owner.test.ts',
  'test/integration/workflow-scheduling.test.ts',
  'test/integration/cli-worker.test.ts',
  'test/integration/sandbox-opt-out.test.ts',
  'test/integration/encrypted-history.test.ts',
  'test/integration/checkpoint-machine-loss.test.ts',
  'test/integration/dev-server.test.ts',
  'test/integration/store-sweep.test.ts',
  'test/integration/deploy-versioning.test.ts',
  'test/integration/workflow-review.test.ts',
  'test/integration/claude-cli-sandbox.test.ts',
  'test/integration/git-delivery.test.ts',
  'test/integration/command-stage-worker-kill.test.ts',
];

/**
 * Vitest's own order (slowest first by the durations it cached, else by file size) needs a cache that a fresh clone,
 * as CI runs, does not have. This one starts the known slow files first, then the other integration files, then the
 * unit files (short, they fill the gaps at the end), each group in vitest's own order; a slow unit file on the list
 * starts with the slow ones.
 */
export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const root = this.ctx.config.root;
    const rank = (file: TestSpecification): number => {
      const relative = path.relative(root, file.moduleId).split(path.sep).join('/');
      const slow = SLOW_FILES.indexOf(relative);
      if (slow >= 0) return slow;
      return relative.startsWith('test/integration/') ? SLOW_FILES.length : SLOW_FILES.length + 1;
    };
    // Array.prototype.sort is stable: within a rank, vitest's order stays.
    return sorted.map((file) => ({ file, rank: rank(file) })).sort((a, b) => a.rank - b.rank).map(({ file }) => file);
  }
}
