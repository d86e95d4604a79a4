// Build step: bundles the workflow code once, so workers start without running webpack.
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { fileURLToPath } from 'node:url';
import { writeFileAtomic } from '../activities/workspace.js';

const workflowsPath = fileURLToPath(new URL('../workflows/index.js', import.meta.url));
const target = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));
const { code } = await bundleWorkflowCode({ workflowsPath, logger: new DefaultLogger('WARN') });
await writeFileAtomic(target, code);
process.stderr.write(`workflow bundle written to ${target} (${Math.round(code.length / 1024)} KiB)\n`);
