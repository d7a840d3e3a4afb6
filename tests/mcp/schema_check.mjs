// Checks JSON values against definitions of the 2026-07-28 MCP schema
// (tests/mcp/schema-2026-07-28.json, trimmed from the spec repository).
// stdin: one JSON line per check, {"def": "<definition>", "value": …};
// stdout: one JSON line per check, {"def", "ok", "errors"}.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import readline from 'node:readline';

const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020').default;
const schema = JSON.parse(
  readFileSync(new URL('./schema-2026-07-28.json', import.meta.url), 'utf8'),
);
const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
ajv.addSchema(schema, 'mcp');
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  const { def, value } = JSON.parse(line);
  const validate = ajv.getSchema(`mcp#/$defs/${def}`);
  const ok = validate ? validate(value) : false;
  const errors = validate ? (validate.errors ?? []) : [`no definition ${def}`];
  console.log(JSON.stringify({ def, ok, errors }));
}
