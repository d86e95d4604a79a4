import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/*
 * The workflow code a worker loads: one of the prebuilt bundles `npm run build` writes next to this file, or, without
 * them, the workflow sources, which the worker bundles at start. The paths are relative to this file: it stays in src/.
 */

/** The workflow bundle `npm run build` writes next to this file; without it the worker bundles at start. */
const PREBUILT_BUNDLE = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));
/** The same with Temporal's OpenTelemetry workflow interceptors, loaded when tracing is on. */
const PREBUILT_TRACED_BUNDLE = fileURLToPath(new URL('../workflow-bundle-traced.js', import.meta.url));
/** Both again, built with the failure converter of encrypting workers (see codec/encoded-failure-converter.ts). */
const PREBUILT_ENCRYPTED_BUNDLE = fileURLToPath(new URL('../workflow-bundle-encrypted.js', import.meta.url));
const PREBUILT_ENCRYPTED_TRACED_BUNDLE = fileURLToPath(new URL('../workflow-bundle-encrypted-traced.js', import.meta.url));

/** The prebuilt workflow bundle for a worker that traces or not, encrypts or not. */
export function prebuiltBundle(traced: boolean, encrypted: boolean): string {
  if (encrypted) return traced ? PREBUILT_ENCRYPTED_TRACED_BUNDLE : PREBUILT_ENCRYPTED_BUNDLE;
  return traced ? PREBUILT_TRACED_BUNDLE : PREBUILT_BUNDLE;
}
// Running from source (tests), the workflows are TypeScript; Temporal's bundler compiles them.
export const WORKFLOWS_PATH = [
  fileURLToPath(new URL('../workflows/index.js', import.meta.url)),
  fileURLToPath(new URL('../workflows/index.ts', import.meta.url)),
].find((file) => existsSync(file));
