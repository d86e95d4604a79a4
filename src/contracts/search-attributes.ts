import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Custom search attributes the workflow keeps current, so runs can be filtered in the Web UI and by `list`.
 * The dev server launcher registers exactly these; a self-hosted cluster needs them created once
 * (`temporal operator search-attribute create`, see docs/deployment.md).
 */
export const PIPELINE_NAME_ATTRIBUTE = defineSearchAttributeKey('AgentPipeline', SearchAttributeType.KEYWORD);
export const CURRENT_STAGES_ATTRIBUTE = defineSearchAttributeKey('AgentPipelineStages', SearchAttributeType.KEYWORD_LIST);
export const COST_USD_ATTRIBUTE = defineSearchAttributeKey('AgentPipelineCostUsd', SearchAttributeType.DOUBLE);
/** The run's state as the status query reports it: `running`, `waiting` (for a person), `completed`, `failed`, `cancelled`. */
export const RUN_STATUS_ATTRIBUTE = defineSearchAttributeKey('AgentPipelineStatus', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTES = [PIPELINE_NAME_ATTRIBUTE, CURRENT_STAGES_ATTRIBUTE, COST_USD_ATTRIBUTE, RUN_STATUS_ATTRIBUTE] as const;
