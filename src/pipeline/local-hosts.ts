import type { PipelineDefinition } from './schema.js';
import type { McpServer, SandboxOption } from './agent-access-schema.js';

/*
 * Hosts a pipeline may not list in `sandbox.allowedDomains`: this machine (loopback, the unspecified address), its
 * link-local network (where cloud metadata services answer) and names without a domain (the worker's own network:
 * compose's `temporal` and `codec-server`). Through the sandbox's proxy such an entry lets an agent's Bash reach the
 * worker host's own services (Temporal's frontend and HTTP API, the tokenless codec server, metrics) and the cloud's
 * credentials endpoint. Only a worker setting (AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL) lets them through.
 * IP literals are read the way the sandbox's resolver reads them (inet_aton): `127.1`, `0x7f.0.0.1`, `0177.0.0.1` and
 * `2130706433` all name 127.0.0.1, and IPv6 literals that embed an IPv4 address name that address.
 */

/** The worker setting that lets pipelines list loopback and link-local hosts. */
export const SANDBOX_ALLOW_LOCAL_VARIABLE = 'AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL';

/** Names that resolve to this machine. */
const LOOPBACK_NAMES = new Set(['localhost', 'localhost.localdomain', 'localhost6', 'localhost6.localdomain6', 'ip6-localhost', 'ip6-loopback']);
/** Names of cloud metadata services (GCP, AWS, Tencent, Oracle; the others answer on 169.254.169.254 only). */
const METADATA_NAMES = ['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal', 'metadata.tencentyun.com', 'metadata.oraclecloud.com'];

/** One part of an inet_aton IPv4 literal: decimal, octal (leading 0) or hex (0x). */
function ipv4Part(part: string): number | undefined {
  if (/^0x[0-9a-f]*$/.test(part)) return part.length === 2 ? 0 : parseInt(part.slice(2), 16);
  if (/^0[0-7]*$/.test(part)) return parseInt(part, 8);
  if (/^[1-9][0-9]*$/.test(part)) return parseInt(part, 10);
  return undefined;
}

/** An IPv4 literal in any spelling inet_aton accepts (1 to 4 parts, the last filling the bytes left), as 32 bits. */
export function parseIpv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length > 4) return undefined;
  const values = parts.map(ipv4Part);
  if (values.some((v) => v === undefined)) return undefined;
  const numbers = values as number[];
  const last = numbers.pop()!;
  if (numbers.some((v) => v > 255) || last >= 2 ** (8 * (4 - numbers.length))) return undefined;
  return numbers.reduce((sum, v, i) => sum + v * 2 ** (8 * (3 - i)), 0) + last;
}

/** Why an IPv4 address (32 bits) is local, or undefined. */
function describeIpv4(address: number): string | undefined {
  const first = Math.floor(address / 2 ** 24);
  const second = Math.floor(address / 2 ** 16) % 256;
  if (first === 127) return 'a loopback address (127.0.0.0/8: this machine)';
  if (first === 0) return 'the unspecified address (0.0.0.0/8: this machine)';
  if (first === 169 && second === 254) return 'a link-local address (169.254.0.0/16, where cloud metadata services answer)';
  // Alibaba Cloud's metadata service.
  if (address === parseIpv4('100.100.100.200')) return 'a cloud metadata address';
  return undefined;
}

/** The eight 16-bit groups of an IPv6 literal (an IPv4 tail counts as two), or undefined when it is not one. */
export function parseIpv6(text: string): number[] | undefined {
  const halves = text.replace(/%.*$/, '').split('::');
  if (halves.length > 2) return undefined;
  const groups = (half: string): number[] | undefined => {
    if (half === '') return [];
    const out: number[] = [];
    for (const [i, piece] of half.split(':').entries()) {
      if (piece.includes('.') && i === half.split(':').length - 1) {
        const v4 = /^\d+\.\d+\.\d+\.\d+$/.test(piece) ? parseIpv4(piece) : undefined;
        if (v4 === undefined) return undefined;
        out.push(Math.floor(v4 / 65536), v4 % 65536);
      } else if (/^[0-9a-f]{1,4}$/.test(piece)) out.push(parseInt(piece, 16));
      else return undefined;
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  if (head.length + tail.length > 7) return undefined;
  return [...head, ...Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/** Why an IPv6 address is local, or undefined; an IPv4 address it embeds is judged as that address. */
function describeIpv6(g: number[]): string | undefined {
  const zeros = (n: number): boolean => g.slice(0, n).every((v) => v === 0);
  const embedded = (): string | undefined => describeIpv4(g[6]! * 65536 + g[7]!);
  if (zeros(8)) return 'the unspecified address (::, this machine)';
  if (zeros(7) && g[7] === 1) return 'a loopback address (::1: this machine)';
  if ((g[0]! & 0xffc0) === 0xfe80) return 'a link-local address (fe80::/10)';
  // IPv4-mapped (::ffff:a.b.c.d), SIIT (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d).
  if ((zeros(5) && g[5] === 0xffff) || (zeros(4) && g[4] === 0xffff && g[5] === 0) || zeros(6)) return embedded();
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((v) => v === 0)) return embedded();
  // AWS's metadata service over IPv6 (fd00:ec2::254).
  if (g[0] === 0xfd00 && g[1] === 0xec2 && g.slice(2, 7).every((v) => v === 0) && g[7] === 0x254) return 'a cloud metadata address';
  return undefined;
}

/** Why a host name (no wildcard) is local, or undefined. */
function describeName(name: string): string | undefined {
  if (LOOPBACK_NAMES.has(name) || name.endsWith('.localhost')) return 'a name of this machine (loopback)';
  if (METADATA_NAMES.includes(name)) return 'the name of a cloud metadata service';
  const v4 = parseIpv4(name);
  if (v4 !== undefined) return describeIpv4(v4);
  const v6 = name.includes(':') ? parseIpv6(name) : undefined;
  if (v6) return describeIpv6(v6);
  // No public host has a name without a dot: it resolves through the worker's hosts file or search domains to its own
  // network (compose's `temporal` and `codec-server`).
  if (!name.includes('.') && !name.includes(':')) return "a name without a domain (resolved on the worker's own network, like a container's name)";
  return undefined;
}

/**
 * Why an `allowedDomains` entry reaches this machine or its link-local network, or undefined when it does not. A
 * wildcard (`*.internal`) is local when a local name matches it.
 */
export function describeLocalHost(entry: string): string | undefined {
  const host = entry.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
  if (!host.startsWith('*.')) return describeName(host);
  const suffix = host.slice(1);
  const matched = [...LOOPBACK_NAMES, ...METADATA_NAMES, 'x.localhost'].find((name) => name.endsWith(suffix));
  return matched === undefined ? undefined : `a wildcard matching ${matched === 'x.localhost' ? 'names of this machine (*.localhost)' : matched} (${describeName(matched)})`;
}

/** An `allowedDomains` entry that names a local host: where it is (a path into the pipeline), the entry and why. */
export interface LocalHostEntry {
  path: (string | number)[];
  host: string;
  reason: string;
}

/** The entries of one `sandbox` option that name local hosts, with paths relative to the option. */
export function localHostsOf(option: SandboxOption | undefined): LocalHostEntry[] {
  const domains = typeof option === 'object' ? (option.allowedDomains ?? []) : [];
  return domains.flatMap((host, i) => {
    const reason = describeLocalHost(host);
    return reason ? [{ path: ['sandbox', 'allowedDomains', i], host, reason }] : [];
  });
}

/**
 * The HTTP and SSE servers of an `mcpServers` map whose `url` names a local host, with paths relative to the map's
 * holder. Claude Code connects to these itself, outside the sandbox, with the worker's network: such a URL sends the
 * agent's MCP requests (and the pipeline's `headers`) to the worker host's own services or the cloud's metadata
 * service. The URL's host is read as WHATWG URLs read it (`http://0x7f.1/` is 127.0.0.1).
 */
export function localMcpHostsOf(servers: Record<string, McpServer> | undefined): LocalHostEntry[] {
  return Object.entries(servers ?? {}).flatMap(([name, server]) => {
    if (!('url' in server) || !URL.canParse(server.url)) return [];
    const host = new URL(server.url).hostname;
    const reason = describeLocalHost(host);
    return reason ? [{ path: ['mcpServers', name, 'url'], host, reason }] : [];
  });
}

/** Every `allowedDomains` entry of a pipeline (its defaults, stages and `finally` stages) that names a local host. */
export function findLocalHosts(pipeline: PipelineDefinition): LocalHostEntry[] {
  const under = (prefix: (string | number)[], option: SandboxOption | undefined): LocalHostEntry[] =>
    localHostsOf(option).map((entry) => ({ ...entry, path: [...prefix, ...entry.path] }));
  return [
    ...under(['defaults'], pipeline.defaults?.sandbox),
    ...pipeline.stages.flatMap((stage, i) => under(['stages', i], stage.sandbox)),
    ...(pipeline.finally ?? []).flatMap((stage, i) => under(['finally', i], stage.sandbox)),
  ];
}

/** What to say about one local entry: the value, why it is refused, and the way out. */
export function localHostMessage(entry: Pick<LocalHostEntry, 'host' | 'reason'> & Partial<Pick<LocalHostEntry, 'path'>>): string {
  const who = entry.path?.includes('mcpServers') ? 'Claude Code (outside the sandbox) would send MCP requests to' : "an agent's Bash could reach";
  return (
    `"${entry.host}" is ${entry.reason}: ${who} the worker host's own services (Temporal, the codec server) ` +
    `or the cloud's metadata service through it; list the real hosts the agents need, or, where the workers' operator allows it, ` +
    `set ${SANDBOX_ALLOW_LOCAL_VARIABLE}=1 on the workers (and for validate and start)`
  );
}
