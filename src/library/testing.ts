// `agent-pipeline/testing`: what the project's own tests use, for yours: a scripted model server that answers the
// Claude Code CLI and the Anthropic SDK like the Messages API, and a launcher for Temporal's dev server.
export {
  startModelServer,
  type ModelServer,
  type ModelServerOptions,
  type RecordedRequest,
} from '../dev/model-server.js';
export {
  loadScenario,
  parseScenario,
  validateScenario,
  ScenarioValidationError,
  type ApiErrorSpec,
  type Rule,
  type Scenario,
  type ScenarioInput,
  type ToolCall,
  type Turn,
} from '../dev/scenario.js';
export { startDevServer, type DevServer, type DevServerOptions } from '../dev/dev-server.js';
export { DevServerError } from '../dev/dev-server-error.js';
export { type SearchAttributeDefinition } from '../dev/dev-server-search-attributes.js';
