// Build step: bundles the workflow code once, so workers start without running webpack.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { fileURLToPath } from 'node:url';
import { writeFileAtomic } from '../activities/workspace/run-workspace.js';
import { OTEL_WORKFLOW_INTERCEPTORS } from '../telemetry/worker-telemetry.js';

const workflowsPath = fileURLToPath(new URL('../workflows/index.js', import.meta.url));
const target = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));
// The traced bundle adds Temporal's OpenTelemetry workflow interceptors; workers load it only when tracing is on, so
// an untraced worker runs no span code in its workflows.
const tracedTarget = fileURLToPath(new URL('../workflow-bundle-traced.js', import.meta.url));
for (const [file, workflowInterceptorModules] of [[target, []], [tracedTarget, [OTEL_WORKFLOW_INTERCEPTORS]]] as const) {
  const { code } = await bundleWorkflowCode({ workflowsPath, workflowInterceptorModules: [...workflowInterceptorModules], logger: new DefaultLogger('WARN') });
  await writeFileAtomic(file, code);
  process.stderr.write(`workflow bundle written to ${file} (${Math.round(code.length / 1024)} KiB)\n`);
}
