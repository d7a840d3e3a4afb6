// A scriptable MCP client on the official TypeScript SDK, for toolhub's
// integration tests (tests/it/mcp*.rs). It reads one JSON command per line on
// stdin and writes one JSON line per answer or event on stdout:
//
//   {"id":1,"op":"connect","url":"http://127.0.0.1:PORT/mcp","token":"…",
//    "sampling":{"text":"…"}, "elicitation":{"action":"accept","content":{…}},
//    "roots":[{"uri":"file:///…","name":"…"}]}
//   {"id":2,"op":"listTools"}            -> {"id":2,"ok":true,"result":{…}}
//   {"id":2,"op":"listPaged","list":"tools"} -> {"pages":[{…,"nextCursor"},…]}
//   {"id":3,"op":"callTool","name":"…","arguments":{…},"progress":true}
//   {"id":4,"op":"abort","target":3}     (cancels op 3: notifications/cancelled)
//   events: {"event":"notification","method":"…","params":{…}}
//           {"event":"progress","target":3,"progress":{…}}
//           {"event":"request","method":"sampling/createMessage","params":{…}}
//
// Commands run concurrently; every answer carries its command's id.

import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

let client;
let transport;
const aborts = new Map();

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function connect(cmd) {
  const capabilities = {};
  if (cmd.sampling) capabilities.sampling = {};
  if (cmd.elicitation) capabilities.elicitation = {};
  if (cmd.roots) capabilities.roots = {};
  client = new Client({ name: 'toolhub-test-driver', version: '1.0.0' }, { capabilities });
  client.fallbackNotificationHandler = async (n) => {
    emit({ event: 'notification', method: n.method, params: n.params ?? null });
  };
  if (cmd.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      emit({ event: 'request', method: req.method, params: req.params });
      return {
        role: 'assistant',
        content: { type: 'text', text: cmd.sampling.text },
        model: 'test-model',
        stopReason: 'endTurn',
      };
    });
  }
  if (cmd.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      emit({ event: 'request', method: req.method, params: req.params });
      return cmd.elicitation;
    });
  }
  if (cmd.roots) {
    client.setRequestHandler(ListRootsRequestSchema, async (req) => {
      emit({ event: 'request', method: req.method, params: req.params ?? null });
      return { roots: cmd.roots };
    });
  }
  const headers = {};
  if (cmd.token) headers.Authorization = `Bearer ${cmd.token}`;
  transport = new StreamableHTTPClientTransport(new URL(cmd.url), {
    requestInit: { headers },
  });
  await client.connect(transport);
  return {
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    protocolVersion: transport.protocolVersion ?? null,
    sessionId: transport.sessionId ?? null,
  };
}

async function run(cmd) {
  switch (cmd.op) {
    case 'connect':
      return connect(cmd);
    case 'listTools':
      return client.listTools();
    case 'callTool': {
      const ac = new AbortController();
      aborts.set(cmd.id, ac);
      const options = { signal: ac.signal, timeout: cmd.timeoutMs ?? 60000 };
      if (cmd.progress) {
        options.onprogress = (p) => emit({ event: 'progress', target: cmd.id, progress: p });
      }
      try {
        return await client.callTool(
          { name: cmd.name, arguments: cmd.arguments ?? {} },
          CallToolResultSchema,
          options,
        );
      } finally {
        aborts.delete(cmd.id);
      }
    }
    case 'abort': {
      const ac = aborts.get(cmd.target);
      if (ac) ac.abort('test aborted the call');
      return { aborted: !!ac };
    }
    case 'listPaged': {
      // Every page of a list, following nextCursor as a client must:
      // {"op":"listPaged","list":"tools"|"resources"|"resourceTemplates"|"prompts","cursor"?}
      const fetchPage = {
        tools: (p) => client.listTools(p),
        resources: (p) => client.listResources(p),
        resourceTemplates: (p) => client.listResourceTemplates(p),
        prompts: (p) => client.listPrompts(p),
      }[cmd.list];
      const pages = [];
      let cursor = cmd.cursor;
      for (let i = 0; i < 1000; i++) {
        const page = await fetchPage(cursor === undefined ? undefined : { cursor });
        pages.push(page);
        cursor = page.nextCursor;
        if (cursor === undefined) break;
      }
      return { pages };
    }
    case 'listResources':
      return client.listResources();
    case 'listResourceTemplates':
      return client.listResourceTemplates();
    case 'readResource':
      return client.readResource({ uri: cmd.uri });
    case 'subscribe':
      return client.subscribeResource({ uri: cmd.uri });
    case 'unsubscribe':
      return client.unsubscribeResource({ uri: cmd.uri });
    case 'listPrompts':
      return client.listPrompts();
    case 'getPrompt':
      return client.getPrompt({ name: cmd.name, arguments: cmd.arguments ?? {} });
    case 'complete':
      return client.complete({ ref: cmd.ref, argument: cmd.argument });
    case 'setLevel':
      return client.setLoggingLevel(cmd.level);
    case 'ping':
      return client.ping();
    case 'close':
      await transport.terminateSession().catch(() => {});
      await client.close();
      return {};
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) return;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    emit({ event: 'bad-command', error: String(e) });
    return;
  }
  run(cmd).then(
    (result) => emit({ id: cmd.id, ok: true, result: result ?? null }),
    (error) =>
      emit({
        id: cmd.id,
        ok: false,
        error: { message: String(error?.message ?? error), code: error?.code ?? null },
      }),
  );
});
lines.on('close', async () => {
  try {
    if (client) await client.close();
  } finally {
    process.exit(0);
  }
});
