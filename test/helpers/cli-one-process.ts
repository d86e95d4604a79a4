/*
 * Runs several `agent-pipeline` commands one after another in one Node process (run by Node itself, which strips the
 * types): `node cli-one-process.ts CLIENT_JS '[["start","--help"],["list","--since","x"]]'`. Each command evaluates
 * the CLI's entry module (dist/cli-bundle/client.js, what bin/agent-pipeline.js loads for all but the worker
 * commands) afresh, with its own process.argv, and gets its own stdout, stderr and exit code; the modules under it
 * load once. A command that connects costs about half a CPU second, most of it loading the Temporal client, so a test
 * that checks many commands pays it once (test/integration/cli-helpers.ts, runCliCommands). Prints one JSON array of
 * { exitCode, stdout, stderr }.
 */
import module from 'node:module';
import { pathToFileURL } from 'node:url';

module.enableCompileCache?.();

interface Captured {
  exitCode: number;
  stdout: string;
  stderr: string;
}

const [client, list] = process.argv.slice(2);
const commands = JSON.parse(list) as string[][];
const realStdout = process.stdout.write.bind(process.stdout);
const realStderr = process.stderr.write.bind(process.stderr);
// The entry module adds one EPIPE listener to stdout each time it is evaluated.
process.stdout.setMaxListeners(0);

/** Runs one command with stdout and stderr captured; what the command writes never reaches the real streams. */
async function runOne(args: string[], index: number): Promise<Captured> {
  const out: string[] = [];
  const err: string[] = [];
  process.stdout.write = ((chunk: string | Uint8Array) => out.push(String(chunk)) > 0) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => err.push(String(chunk)) > 0) as typeof process.stderr.write;
  process.exitCode = undefined;
  process.argv = [process.execPath, client, ...args];
  try {
    // A query makes it a new module for the loader, so its top level (build the program, parse argv) runs again.
    await import(`${pathToFileURL(client).href}?command=${index}`);
  } finally {
    process.stdout.write = realStdout;
    process.stderr.write = realStderr;
  }
  return { exitCode: Number(process.exitCode ?? 0), stdout: out.join(''), stderr: err.join('') };
}

const results: Captured[] = [];
for (const [index, args] of commands.entries()) results.push(await runOne(args, index));
process.exitCode = 0;
realStdout(`${JSON.stringify(results)}\n`);
