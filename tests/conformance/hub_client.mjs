// The hub as the MCP client of the official conformance suite's client
// scenarios (tests/it/mcp/client_conformance.rs). The suite starts a
// scenario's MCP server and runs this with the server's URL as the last
// argument, the scenario in MCP_CONFORMANCE_SCENARIO and its inputs (the
// tool calls to make, when it names them) in MCP_CONFORMANCE_CONTEXT.
//
// It starts the hub (TOOLHUB_BIN) with that server as its one upstream,
// `x`, waits until the hub runs it, lists its tools over /ws and calls
// them: the calls the scenario names, else every tool with arguments made
// from its schema (over /mcp when the server asks the client for input,
// which a /ws client cannot answer). Needs Node 22 (the global WebSocket):
// tests/node_modules/.bin/node. The `auth/*` scenarios are not driven: the
// hub has no OAuth client for its upstreams.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
const log = (...a) => console.error('[hub_client]', ...a);

if (scenario.startsWith('auth/')) {
  log(`${scenario}: not driven (the hub has no OAuth client)`);
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'hub-client-'));
const config = join(dir, 'config.json');
writeFileSync(config, JSON.stringify({
  server: { listen: '127.0.0.1:0', token: false },
  taskEngine: { stateDir: join(dir, 'state') },
  builtin: { workspace: join(dir, 'workspace') },
  recording: { storagePath: join(dir, 'recordings') },
  mcpServers: { x: { url } },
}));

const hub = spawn(process.env.TOOLHUB_BIN ?? 'toolhub', ['--config', config], {
  stdio: ['ignore', 'ignore', 'pipe'],
  env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info' },
});
const hubLog = [];

// Never outlive the suite's client timeout (30 s) without saying why, and
// never leave the hub behind.
function stop(why) {
  log(why);
  log('hub log tail:\n' + hubLog.slice(-40).join('\n'));
  hub.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  process.exit(1);
}
process.on('SIGTERM', () => stop('stopped by the suite'));
setTimeout(() => stop('timed out after 25 s'), 25_000).unref();

// The address from the hub's `listening on ws://ADDR/ws` log line.
const addr = await new Promise((resolve, reject) => {
  let buf = '';
  hub.stderr.on('data', (d) => {
    buf += d;
    const lines = buf.split('\n');
    buf = lines.pop();
    for (const line of lines) {
      hubLog.push(line);
      const m = line.match(/listening on ws:\/\/(\S+?)\/ws/);
      if (m) resolve(m[1]);
    }
  });
  hub.on('exit', (code) => reject(new Error(`the hub exited (${code}) before listening`)));
});

const ws = new WebSocket(`ws://${addr}/ws`);
const waiting = new Map();
const events = [];
let nextId = 0;
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  const w = waiting.get(msg.replyTo);
  if (w) {
    waiting.delete(msg.replyTo);
    w(msg);
  } else {
    events.push(msg);
    for (const f of [...listeners]) f(msg);
  }
};
const listeners = new Set();
function request(frame) {
  const id = ++nextId;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ ...frame, id }));
  });
}
/** The first frame (seen or to come) that `pred` accepts. */
function frame(pred) {
  const seen = events.find(pred);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve) => {
    const f = (msg) => {
      if (pred(msg)) {
        listeners.delete(f);
        resolve(msg);
      }
    };
    listeners.add(f);
  });
}

/** Values for `names` of a JSON schema: each one's default, else one of its type. */
function valuesFor(schema, names) {
  const out = {};
  for (const name of names) {
    const p = schema.properties?.[name] ?? {};
    const type = Array.isArray(p.type) ? p.type[0] : p.type;
    out[name] = p.default ?? {
      number: 2, integer: 2, boolean: true, object: {}, array: [], null: null,
    }[type] ?? 'test';
  }
  return out;
}
/** A call's arguments: the tool's required parameters. */
const argsFor = (schema) => valuesFor(schema ?? {}, schema?.required ?? []);

/**
 * A call through the hub's /mcp, from an MCP client that can answer
 * elicitations (a /ws client cannot): the hub relays what the upstream
 * asks (mid-call, or in an InputRequiredResult) and sends the answers up.
 * The answer is a form's: accepted, every field at its default.
 */
async function callOverMcp(name, args) {
  const client = new Client({ name: 'hub-client', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    const schema = req.params.requestedSchema ?? {};
    return { action: 'accept', content: valuesFor(schema, Object.keys(schema.properties ?? {})) };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://${addr}/mcp`)));
  try {
    const r = await client.callTool({ name, arguments: args });
    return { success: !r.isError, error: r.isError ? r.content : undefined };
  } finally {
    await client.close();
  }
}

/** Scenarios whose server asks the client for input during a call. */
const ASKS_FOR_INPUT = new Set(['sep-2322-client-request-state', 'elicitation-sep1034-client-defaults']);

let failed = false;
try {
  await frame((m) => m.type === 'hello');
  const health = await request({ type: 'health_check' });
  if (!health.servers?.some((s) => s.name === 'x' && s.state === 'running')) {
    await frame((m) => m.type === 'server_status' && m.name === 'x' && m.state === 'running');
  }
  const listed = await request({ type: 'list_tools' });
  const tools = listed.tools.filter((t) => t.server === 'x');
  log('tools:', tools.map((t) => t.name).join(', '));

  let calls = context.toolCalls ?? tools.map((t) => ({ name: t.name, arguments: argsFor(t.inputSchema) }));
  if (scenario === 'json-schema-2020-12-preservation') {
    // Echo the focal tool's schema as the hub lists it.
    const focal = tools.find((t) => t.name !== 'json_schema_echo');
    calls = [{ name: 'json_schema_echo', arguments: { schema: focal?.inputSchema } }];
  }
  for (const c of calls) {
    const tool = tools.find((t) => t.name === c.name);
    if (!tool) {
      log(`${c.name}: not listed by the hub`);
      continue;
    }
    const r = ASKS_FOR_INPUT.has(scenario)
      ? await callOverMcp(tool.qualifiedName, c.arguments ?? {})
      : await request({ type: 'tool_call', tool: tool.qualifiedName, params: c.arguments ?? {}, retry: false });
    log(`${c.name}:`, r.success ? 'ok' : JSON.stringify(r.error));
    failed ||= !r.success;
  }
} catch (e) {
  failed = true;
  log('failed:', e);
  log('hub log tail:\n' + hubLog.slice(-30).join('\n'));
} finally {
  ws.close();
  hub.kill('SIGTERM');
  await new Promise((r) => (hub.exitCode !== null ? r() : hub.on('exit', r)));
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
