// Everything the worker bundles into the workflow sandbox. Deterministic code only.
export { pipelineWorkflow } from './pipeline.js';
export { leaseWorkflow } from './lease-workflow.js';
export { apiKeyLimitWorkflow } from './api-key-limit.js';
