import { detectAgentAuth } from '../activities/backends/claude-cli/agent-auth.js';

/*
 * What `dev` tells a person at start about the model its agents will reach. Without a key and without a scenario
 * the stack still starts (command stages and approvals need no model), but every agent stage would fail
 * API_KEY_MISSING minutes later, at the README's next step; saying so up front names the two ways out.
 */

/** How the demo scenario is named in the notice: where it is for a user of the package, then in a clone. */
const DEMO_SCENARIO = 'node_modules/agent-pipeline/examples/demo/scenario.yaml (in a clone: examples/demo/scenario.yaml)';

/** How each way {@link detectAgentAuth} finds is named in the notice. */
const AUTH_NAMES: Record<string, string> = {
  bedrock: 'Amazon Bedrock (CLAUDE_CODE_USE_BEDROCK)',
  vertex: 'Google Vertex AI (CLAUDE_CODE_USE_VERTEX)',
  'auth-token': 'ANTHROPIC_AUTH_TOKEN',
  'oauth-token': 'CLAUDE_CODE_OAUTH_TOKEN',
  'api-key-helper': 'the apiKeyHelper of AGENT_PIPELINE_CLAUDE_SETTINGS',
};

/**
 * The notice for a local worker started with `env` and `--scenario scenarioFile`, or undefined when the log lines
 * of the stack already say it (a scenario the scripted model server answers from, the API key in use).
 */
export function describeAgentCredentials(env: NodeJS.ProcessEnv, scenarioFile: string | undefined): string | undefined {
  if (env.ANTHROPIC_API_KEY) {
    return scenarioFile ? `ANTHROPIC_API_KEY is set, so --scenario ${scenarioFile} is not used: agents call the Anthropic API (unset the key to use the scenario).` : undefined;
  }
  if (scenarioFile) return undefined;
  const other = detectAgentAuth(env);
  if (other) {
    return (
      `No ANTHROPIC_API_KEY set: claude-cli stages authenticate with ${AUTH_NAMES[other] ?? other} from the environment; ` +
      'anthropic-api stages will fail API_KEY_MISSING (set ANTHROPIC_API_KEY before `agent-pipeline dev` for them).'
    );
  }
  return [
    'Warning: no ANTHROPIC_API_KEY and no --scenario, so every agent stage will fail API_KEY_MISSING (command stages and approvals still run). To give agents a model, either:',
    '  - set ANTHROPIC_API_KEY before `agent-pipeline dev` (the Anthropic API; other ways to authenticate: docs/configuration.md), or',
    `  - pass --scenario FILE (a scripted model, no network), e.g. --scenario ${DEMO_SCENARIO}`,
  ].join('\n');
}
