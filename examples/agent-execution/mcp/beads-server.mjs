// A minimal MCP server (stdio, newline-delimited JSON-RPC) so the example runs offline: `beads` offers
// `bead_show`, `docs` offers `doc_search`. Replace it with your real servers (filesystem, github, puppeteer...).
import { createInterface } from 'node:readline';

const mode = process.argv[2] ?? 'beads';
const tool =
  mode === 'docs'
    ? { name: 'doc_search', description: 'Search the project documentation', run: (args) => `No documentation mentions "${args.query ?? ''}".` }
    : { name: 'bead_show', description: 'Show a bead (id, title, description)', run: (args) => `Bead ${args.id ?? '?'}: open, priority 2.` };

const reply = (id, result) => process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id, result })}\n`);
createInterface({ input: process.stdin }).on('line', (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (message.id === undefined) return; // a notification
  if (message.method === 'initialize') {
    reply(message.id, { protocolVersion: message.params?.protocolVersion ?? '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: mode, version: '1.0.0' } });
  } else if (message.method === 'tools/list') {
    reply(message.id, { tools: [{ name: tool.name, description: tool.description, inputSchema: { type: 'object', properties: { id: { type: 'string' }, query: { type: 'string' } } } }] });
  } else if (message.method === 'tools/call') {
    reply(message.id, { content: [{ type: 'text', text: tool.run(message.params?.arguments ?? {}) }] });
  } else {
    process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: `unknown method ${message.method}` } })}\n`);
  }
});
