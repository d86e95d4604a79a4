import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { applyAgentDefaults, loadAgentFile } from './agent-file.js';
import { backendTraits, type PrewarmTarget } from '../backends/stage-backend.js';
import { composeSystem } from './compose.js';
import { composeRawSystem } from './raw-prompt.js';
import { listTemplateVariables } from '../../pipeline/template.js';
import { loadSystemPrompt } from './system-prompt.js';

/** What {@link prewarmTargets} needs of the current attempt's input. */
export interface PrewarmSource {
  baseDir: string;
  systemPromptFile?: string;
  /** @unit US dollars */
  budgetRemainingUsd?: number;
  resolveAddDirs(stage: ResolvedStage): string[] | undefined;
}

/**
 * The stages the workflow named as ready after this one, as their first attempt will see them: agent file defaults
 * applied and the system prompt composed, the same way `assemblePrompt` does. Only stages of a backend that prewarms
 * (the CLI's) have an agent to start early; a stage whose files cannot be read is left out (its own attempt reports that).
 */
export async function prewarmTargets(hints: readonly ResolvedStage[], source: PrewarmSource): Promise<PrewarmTarget[]> {
  const targets: PrewarmTarget[] = [];
  for (const hint of hints) {
    try {
      const agent = hint.agent ? await loadAgentFile(source.baseDir, hint.agent, hint.id) : undefined;
      const stage = agent ? applyAgentDefaults(hint, agent.frontmatter) : hint;
      if (!backendTraits(stage.backend).prewarms) continue;
      // Additions filled from the run (`{{stages.…}}`) are only known once the stage starts: it starts cold.
      if (listTemplateVariables(stage.appendSystemPrompt ?? '').length > 0) continue;
      if (!capKnownAhead(stage.maxBudgetUsd, source.budgetRemainingUsd)) continue;
      const wrapper = await loadSystemPrompt(source.baseDir, source.systemPromptFile, stage.id);
      // As `assemblePrompt` does: raw stages, and every stage under the pipeline's own system prompt, go as written.
      const asWritten = stage.promptFormat === 'raw' || source.systemPromptFile !== undefined;
      targets.push({
        stage,
        system: asWritten ? composeRawSystem(stage, agent?.persona, undefined, source.systemPromptFile ? wrapper : undefined) : composeSystem(stage, agent?.persona, wrapper),
        addDirs: source.resolveAddDirs(stage),
        maxBudgetUsd: stage.maxBudgetUsd,
      });
    } catch {
      // Not started early, then; the stage's own attempt meets the same problem and reports it.
    }
  }
  return targets;
}

/**
 * Whether the spend cap the stage's attempt will start with (its `--max-budget-usd`, part of the command line a
 * waiting process must match) is known now. Under a pipeline budget the cap is what is left when the stage starts, which
 * the stages running now are still spending: a process started with today's figure could never be adopted, and would
 * cost a `claude` start for nothing. The stage's own cap, when lower than what is left now, is the cap either way
 * (unless the stages running now spend the difference, and then the waiting process is stopped, as any that differs).
 */
function capKnownAhead(stageCapUsd: number | undefined, budgetRemainingUsd: number | undefined): boolean {
  return budgetRemainingUsd === undefined || (stageCapUsd !== undefined && stageCapUsd < budgetRemainingUsd);
}
