import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { MAX_LABEL_SETS, PipelineMetrics } from '../../src/telemetry/metrics.js';
import { parseMetricsAddress } from '../../src/telemetry/metrics-server.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * Issue 19, reproduction 7: the compose file published Temporal (no TLS, no auth) and its Web UI on every interface,
 * the metrics endpoint bound 0.0.0.0 when given only a port, and metric labels taken from run input were unbounded.
 */

describe('the compose file', () => {
  it('publishes every port on 127.0.0.1 only', async () => {
    const compose = parse(await readFile(path.join(PROJECT_ROOT, 'docker-compose.yml'), 'utf8')) as { services: Record<string, { ports?: string[] }> };
    const published = Object.entries(compose.services).flatMap(([name, service]) => (service.ports ?? []).map((port) => `${name} ${port}`));
    expect(published.length).toBeGreaterThan(0);
    expect(published.filter((entry) => !entry.split(' ')[1].startsWith('127.0.0.1:'))).toEqual([]);
  });
});

describe('the metrics endpoint', () => {
  it('binds the loopback interface unless a host is given', () => {
    expect(parseMetricsAddress(':9464').host).toBe('127.0.0.1');
    expect(parseMetricsAddress('0.0.0.0:9464').host).toBe('0.0.0.0');
  });

  it('keeps label values to plain names and caps the distinct series a run can create', async () => {
    const metrics = new PipelineMetrics();
    const record = (pipeline: string, stage: string) => {
      const labels = metrics.boundLabels({ pipeline, stage, backend: 'claude-cli', model: 'sonnet' });
      metrics.stageFailures.inc({ pipeline: labels.pipeline, stage: labels.stage, backend: labels.backend, type: 'X' });
      return labels;
    };
    expect(record('demo', 'spec')).toMatchObject({ pipeline: 'demo', stage: 'spec' });
    expect(record('a"} evil{', 'x\ny')).toMatchObject({ pipeline: 'invalid', stage: 'invalid' });
    for (let i = 0; i < MAX_LABEL_SETS + 500; i++) record('flood', `stage-${i}`);
    const series = (await metrics.text()).split('\n').filter((line) => line.startsWith('agent_pipeline_stage_failures_total{'));
    expect(series.length).toBeLessThanOrEqual(MAX_LABEL_SETS + 1);
    expect(series.some((line) => line.includes('pipeline="other"'))).toBe(true);
  });
});
