import { readFileSync } from 'node:fs';
import { SIGNING_KEY_VARIABLE } from '../../../trust/keys.js';
import { ENCRYPTION_KEY_VARIABLE, encryptionSecretValues } from '../../../codec/encryption-key.js';
import { STORE_VARIABLES, storeSecretValues } from '../../../store/store-settings.js';

/**
 * How Claude Code may authenticate, and what of the worker's environment reaches the agent for it. Every value here
 * that is a credential is registered as a secret, so it is redacted from results, failures and transcripts.
 */

/**
 * Amazon Bedrock's variables: passed to agents only when Bedrock is on (`CLAUDE_CODE_USE_BEDROCK`). Otherwise the AWS
 * credentials are the worker's for other uses (an `s3://` store on the SDK's default chain), never an agent's.
 */
export const BEDROCK_VARIABLES = [
  'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_REGION',
  'AWS_DEFAULT_REGION', 'AWS_BEARER_TOKEN_BEDROCK', 'AWS_CONFIG_FILE', 'AWS_SHARED_CREDENTIALS_FILE', 'ANTHROPIC_BEDROCK_BASE_URL',
  'CLAUDE_CODE_SKIP_BEDROCK_AUTH',
] as const;

/** Variables Claude Code reads for each way it authenticates (https://docs.claude.com/en/docs/claude-code/settings). */
export const AUTH_VARIABLES = [
  'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN',
  // Amazon Bedrock
  'CLAUDE_CODE_USE_BEDROCK', ...BEDROCK_VARIABLES,
  // Google Vertex AI
  'CLAUDE_CODE_USE_VERTEX', 'CLOUD_ML_REGION', 'ANTHROPIC_VERTEX_PROJECT_ID', 'GOOGLE_APPLICATION_CREDENTIALS', 'ANTHROPIC_VERTEX_BASE_URL',
  'CLAUDE_CODE_SKIP_VERTEX_AUTH',
  // Models a provider needs named explicitly.
  'ANTHROPIC_MODEL', 'ANTHROPIC_SMALL_FAST_MODEL',
] as const;

/** Of those, the ones whose values are credentials. */
const CREDENTIAL_VARIABLES = [
  'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN',
  'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_BEARER_TOKEN_BEDROCK',
] as const;

/** Settings file (or JSON) handed to every agent with `--settings`, e.g. one that sets `apiKeyHelper`. */
export const SETTINGS_VARIABLE = 'AGENT_PIPELINE_CLAUDE_SETTINGS';
/** Comma-separated names of more variables to pass to agents (`GH_TOKEN,SSH_AUTH_SOCK`); their values are secrets. */
export const AGENT_ENV_VARIABLE = 'AGENT_PIPELINE_AGENT_ENV';

/** The ways to authenticate, as the API_KEY_MISSING message lists them. */
export const AUTH_MODES_HELP =
  'ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN (a subscription: `claude setup-token`), ' +
  'CLAUDE_CODE_USE_BEDROCK=1 with AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK), ' +
  'CLAUDE_CODE_USE_VERTEX=1 with CLOUD_ML_REGION, ANTHROPIC_VERTEX_PROJECT_ID and Google credentials, ' +
  `or ${SETTINGS_VARIABLE} naming a settings file with an apiKeyHelper`;

/**
 * Keys an agent must never hold, even when AGENT_PIPELINE_AGENT_ENV names them: with the signing key an agent could
 * start runs and approve its own gates; with the encryption key it could read every run's history; with the store's
 * settings, every run's checkpoints.
 */
export const NEVER_FOR_AGENTS: readonly string[] = [SIGNING_KEY_VARIABLE, ENCRYPTION_KEY_VARIABLE, ...STORE_VARIABLES];

/** Whether Bedrock is on, the one case agents are given the AWS variables. */
export function bedrockOn(env: NodeJS.ProcessEnv): boolean {
  const value = env.CLAUDE_CODE_USE_BEDROCK?.trim();
  return !!value && value !== '0' && value.toLowerCase() !== 'false';
}

/** The authentication variables an agent is given: all of AUTH_VARIABLES, the AWS ones only with Bedrock on. */
export function agentAuthVariables(env: NodeJS.ProcessEnv): string[] {
  const bedrock = bedrockOn(env);
  return AUTH_VARIABLES.filter((name) => bedrock || !(BEDROCK_VARIABLES as readonly string[]).includes(name));
}

/** The extra variable names of `AGENT_PIPELINE_AGENT_ENV` (never a signing or encryption key). */
export function extraAgentVariables(env: NodeJS.ProcessEnv): string[] {
  return (env[AGENT_ENV_VARIABLE] ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !NEVER_FOR_AGENTS.includes(name));
}

/** Values to keep out of everything reported: the credentials, and every variable passed with AGENT_PIPELINE_AGENT_ENV. */
export function agentSecretValues(env: NodeJS.ProcessEnv): string[] {
  return [...CREDENTIAL_VARIABLES, ...extraAgentVariables(env)].map((name) => env[name]).filter((v): v is string => !!v);
}

/** Variables whose whole value is a credential, whether or not any agent is given them. */
const WORKER_CREDENTIAL_VARIABLES = ['GH_TOKEN', 'GITHUB_TOKEN', 'GH_ENTERPRISE_TOKEN', 'TEMPORAL_API_KEY', 'TEMPORAL_TLS_CLIENT_KEY_DATA'] as const;

/** Names that say a variable holds a credential (`NPM_TOKEN`, `DB_PASSWORD`, `SENTRY_AUTH_TOKEN`, `X_API_KEY`, …). */
const CREDENTIAL_NAME = /(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY|SECRET_KEY|CREDENTIALS?)(_|$)/i;

/** Header variables of OpenTelemetry exporters: `key=value,key2=value2`, the values usually bearer tokens. */
const OTEL_HEADER_VARIABLE = /^OTEL_EXPORTER_OTLP(_(TRACES|METRICS|LOGS))?_HEADERS$/;

/** The values of an OTLP headers variable, each also URL-decoded (the spec lets values be percent-encoded). */
function otelHeaderValues(raw: string): string[] {
  const values: string[] = [];
  for (const pair of raw.split(',')) {
    const at = pair.indexOf('=');
    if (at < 0) continue;
    const value = pair.slice(at + 1).trim();
    values.push(value);
    // `Authorization=Bearer%20abc`: the token alone too, so it is hidden however it is written.
    try {
      const decoded = decodeURIComponent(value);
      values.push(decoded, ...decoded.split(/\s+/).slice(1));
    } catch {
      // Not percent-encoded.
    }
    values.push(...value.split(/\s+|%20/).slice(1));
  }
  return values;
}

/**
 * Every secret the worker holds, whatever its agents are given: the agents' credentials and AGENT_PIPELINE_AGENT_ENV,
 * the GitHub and Temporal credentials delivery and the connection use, OpenTelemetry exporter headers, and any
 * variable named like a credential. All are redacted from results, failures, logs and transcripts.
 */
export function workerSecretValues(env: NodeJS.ProcessEnv): string[] {
  // The payload encryption keys: the whole setting and each key's base64 (docs/security.md#encrypted-history).
  const values = [...agentSecretValues(env), ...encryptionSecretValues(env[ENCRYPTION_KEY_VARIABLE]), ...storeSecretValues(env)];
  for (const [name, value] of Object.entries(env)) {
    if (!value) continue;
    if (OTEL_HEADER_VARIABLE.test(name)) values.push(...otelHeaderValues(value));
    else if ((WORKER_CREDENTIAL_VARIABLES as readonly string[]).includes(name) || CREDENTIAL_NAME.test(name)) values.push(value);
  }
  return values;
}

/** True when the settings Claude Code will load (`AGENT_PIPELINE_CLAUDE_SETTINGS`, a file or inline JSON) name an apiKeyHelper. */
function settingsHaveKeyHelper(settings: string | undefined): boolean {
  if (!settings) return false;
  try {
    const text = settings.trim().startsWith('{') ? settings : readFileSync(settings, 'utf8');
    const parsed = JSON.parse(text) as { apiKeyHelper?: unknown };
    return typeof parsed.apiKeyHelper === 'string' && parsed.apiKeyHelper !== '';
  } catch {
    return false;
  }
}

/** How the agent will authenticate, or undefined when the worker has none of the ways Claude Code supports. */
export function detectAgentAuth(env: NodeJS.ProcessEnv): string | undefined {
  const set = (name: string): boolean => !!env[name];
  if (bedrockOn(env)) return 'bedrock';
  if (set('CLAUDE_CODE_USE_VERTEX')) return 'vertex';
  if (set('ANTHROPIC_API_KEY')) return 'api-key';
  if (set('ANTHROPIC_AUTH_TOKEN')) return 'auth-token';
  if (set('CLAUDE_CODE_OAUTH_TOKEN')) return 'oauth-token';
  if (settingsHaveKeyHelper(env[SETTINGS_VARIABLE])) return 'api-key-helper';
  return undefined;
}
