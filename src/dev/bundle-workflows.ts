// Build step: bundles the workflow code once, so workers start without running webpack.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFileAtomic } from '../activities/workspace/run-workspace.js';
import { ENCODED_FAILURE_CONVERTER_PATH, MARKING_PAYLOAD_CONVERTER_PATH } from '../codec/data-converter.js';
import { prebuiltBundle } from '../worker/bundles.js';
import { OTEL_WORKFLOW_INTERCEPTORS } from '../telemetry/worker-telemetry.js';
import { relativizeInlineSourceMap } from './bundle-source-map.js';

const workflowsPath = fileURLToPath(new URL('../workflows/index.js', import.meta.url));
const projectRoot = fileURLToPath(new URL('../../', import.meta.url));
// A worktree may link node_modules from another checkout: the folder it really lives in is named nowhere either.
const linkedRoots = [path.dirname(realpathSync(path.join(projectRoot, 'node_modules')))];
// The traced bundles add Temporal's OpenTelemetry workflow interceptors; workers load them only when tracing is on, so
// an untraced worker runs no span code in its workflows. The encrypted bundles convert failures with the failure
// converter of encrypting workers (message and stack trace encoded, so the codec encrypts them) and their payload
// converter (it marks what arrived unencrypted); a worker loads them when AGENT_PIPELINE_ENCRYPTION_KEY is set.
for (const traced of [false, true]) {
  for (const encrypted of [false, true]) {
    const target = prebuiltBundle(traced, encrypted);
    const { code } = await bundleWorkflowCode({
      workflowsPath,
      workflowInterceptorModules: traced ? [OTEL_WORKFLOW_INTERCEPTORS] : [],
      ...(encrypted ? { failureConverterPath: ENCODED_FAILURE_CONVERTER_PATH, payloadConverterPath: MARKING_PAYLOAD_CONVERTER_PATH } : {}),
      logger: new DefaultLogger('WARN'),
    });
    // The shipped bundle names no folder of this machine (see relativizeInlineSourceMap).
    await writeFileAtomic(target, relativizeInlineSourceMap(code, projectRoot, path.dirname(target), linkedRoots));
    process.stderr.write(`workflow bundle written to ${target} (${Math.round(code.length / 1024)} KiB)\n`);
  }
}
