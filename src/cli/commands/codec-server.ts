import { InvalidArgumentError, type Command } from 'commander';
import { printNote } from '../output.js';

/** The variable that can hold the bearer token instead of `--token` (argv is visible to every user of the host). */
const TOKEN_VARIABLE = 'AGENT_PIPELINE_CODEC_TOKEN';

function parseListenPort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new InvalidArgumentError(`expected a port number from 0 to 65535, got "${value}"`);
  return port;
}

/** `--allowed-host NAME[:PORT]`, repeatable: a host name or address, no scheme or path. */
function collectHost(value: string, previous: string[] = []): string[] {
  if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(value)) {
    throw new InvalidArgumentError(`expected a host name or address with an optional port, such as ui.example.com or localhost:9888, got "${value}"`);
  }
  return [...previous, value];
}

function parseOrigin(value: string): string {
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
    return url.origin;
  } catch {
    throw new InvalidArgumentError(`expected the Web UI's origin as a URL such as http://localhost:8080, got "${value}"`);
  }
}

export function addCodecServerCommand(program: Command): void {
  program
    .command('codec-server')
    .description('serve the remote codec protocol so the Temporal Web UI shows encrypted runs decrypted')
    .option('--port <port>', 'port to listen on (0: any free port)', parseListenPort, 8888)
    .option('--host <address>', 'address to listen on; 0.0.0.0 only inside a container or behind your own access control', '127.0.0.1')
    .option('--origin <url>', "the Web UI's origin (e.g. http://localhost:8080), the one origin the browser may call from", parseOrigin)
    .option('--token <token>', `a bearer token every request must carry (or set ${TOKEN_VARIABLE}, which keeps it out of the process list)`)
    .option(
      '--allowed-host <name[:port]>',
      'a name the browser calls the server by, besides localhost, 127.0.0.1 and [::1] (repeatable; without a port: the one it listens on); requests naming others get 421',
      collectHost,
    )
    .addHelpText(
      'after',
      '\nKeys: AGENT_PIPELINE_ENCRYPTION_KEY, the same as the workers and clients have. Point the Web UI at it with\n' +
        'TEMPORAL_CODEC_ENDPOINT=http://localhost:8888 (its browser calls the endpoint). Whoever reaches the server reads\n' +
        'every run in plain text: keep it on 127.0.0.1 or behind the same access control as the UI. It answers only requests\n' +
        'whose Host header names localhost, 127.0.0.1, [::1], --host or an --allowed-host, which a web page that points its\n' +
        'own name at this address (DNS rebinding) cannot send. docs/security.md.',
    )
    .action(async (opts: { port: number; host: string; origin?: string; token?: string; allowedHost?: string[] }) => {
      const { clientCodecsFromEnv } = await import('../../library/connection.js');
      const { encryptionCodecOf } = await import('../../codec/data-converter.js');
      const { ENCRYPTION_KEY_VARIABLE } = await import('../../codec/encryption-key.js');
      const { startCodecServer } = await import('../../codec/codec-server.js');
      // Encryption, then the claim check: the UI sees a large payload, not the reference the workers stored it under.
      const codecs = clientCodecsFromEnv();
      // Without keys it passes payloads through unchanged, so a Web UI pointed at it (the compose file's) works whether
      // or not runs are encrypted; it says so, since a person who meant to decrypt has forgotten the keys.
      if (!encryptionCodecOf(codecs)) printNote(`${ENCRYPTION_KEY_VARIABLE} is not set: payloads pass through unchanged; set it to the keys the workers use to decrypt`);
      const token = opts.token ?? (process.env[TOKEN_VARIABLE] || undefined);
      const server = await startCodecServer({ codecs, port: opts.port, host: opts.host, origin: opts.origin, token, allowedHosts: opts.allowedHost });
      printNote(
        `Codec server at ${server.url} (POST /encode, /decode)${opts.origin ? `, for the Web UI at ${opts.origin}` : ', no CORS origin (give --origin for the Web UI)'}` +
          `${token ? ', bearer token required' : ''}. Ctrl-C stops.`,
      );
      await new Promise<void>((resolve) => ['SIGINT', 'SIGTERM'].forEach((signal) => process.once(signal, () => resolve())));
      await server.close();
    });
}
