// Serves the site fixtures (tests/extension/sites/<id>/) under the real
// host names over HTTPS: one server on 127.0.0.1, an ephemeral port, a
// self-signed certificate made at start (openssl CLI) for all the hosts;
// the site is chosen by the Host header. Chromium reaches it with
//   --host-resolver-rules="MAP chatgpt.com 127.0.0.1:PORT, …"
//   --ignore-certificate-errors
// so https://chatgpt.com/c/abc is the chatgpt fixture, and an extension's
// content script matches it as it would the real site.
//
// Paths: /_fixture/app.js (the site's app.js bundled with esbuild, with its
// editor from tests/node_modules; built once at start, nothing from a CDN),
// /_fixture/style.css, /_fixture/quill.core.css; any other path is the
// site's index.html (an SPA: /c/abc, /share/x, /app/123, /agents?id=… all
// load the app, which renders the conversation of that path).
//
// A conversation can be seeded two ways: in the page, fixture.seed(path,
// messages) (localStorage of that origin), or here before the page opens,
// sites.seed(siteId, path, messages): index.html then carries it and the
// app writes it to localStorage when that browser has none for the path.
//
//   const sites = await startSites();
//   sites.url("chatgpt", "/share/abc")  // https://chatgpt.com/share/abc
//   sites.hostResolverRules             // for --host-resolver-rules=
//   await sites.close();

import { createServer } from "node:https";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TESTS = path.resolve(HERE, "../..");
const require = createRequire(path.join(TESTS, "package.json"));

/** Site id → the host names it is served under (the first is the main one). */
export const SITES = {
  chatgpt: ["chatgpt.com"],
  claude: ["claude.ai"],
  gemini: ["gemini.google.com"],
  genspark: ["www.genspark.ai", "genspark.ai"],
};

function certificate(dir, hosts) {
  const key = path.join(dir, "key.pem");
  const crt = path.join(dir, "cert.pem");
  execFileSync(
    "openssl",
    [
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
      "-keyout", key, "-out", crt, "-subj", "/CN=toolhub site fixtures",
      "-addext", "subjectAltName=" + hosts.map((h) => "DNS:" + h).join(",") + ",IP:127.0.0.1",
    ],
    { stdio: "ignore" },
  );
  return { key: readFileSync(key), cert: readFileSync(crt) };
}

async function bundle(siteId) {
  const esbuild = require("esbuild");
  const r = await esbuild.build({
    entryPoints: [path.join(HERE, siteId, "app.js")],
    bundle: true,
    write: false,
    format: "iife",
    target: "chrome120",
    sourcemap: "inline",
    nodePaths: [path.join(TESTS, "node_modules")],
    logLevel: "silent",
  });
  return r.outputFiles[0].text;
}

export async function startSites() {
  const dir = mkdtempSync(path.join(tmpdir(), "toolhub-sites-"));
  const hostToSite = {};
  for (const [id, hs] of Object.entries(SITES)) for (const h of hs) hostToSite[h] = id;
  const hosts = Object.keys(hostToSite);
  const tls = certificate(dir, hosts);

  const assets = {};
  await Promise.all(
    Object.keys(SITES).filter((id) => existsSync(path.join(HERE, id, "app.js"))).map(async (id) => {
      assets[id] = {
        "/_fixture/app.js": ["text/javascript", await bundle(id)],
        "/_fixture/style.css": ["text/css", readFileSync(path.join(HERE, id, "style.css"), "utf8")],
        index: readFileSync(path.join(HERE, id, "index.html"), "utf8"),
      };
    }),
  );
  const quillCss = readFileSync(require.resolve("quill/dist/quill.core.css"), "utf8");
  const seeds = {}; // site → {path: messages}

  const server = createServer(tls, (req, res) => {
    const host = (req.headers.host || "").replace(/:\d+$/, "").toLowerCase();
    const id = hostToSite[host];
    if (!id || !assets[id]) {
      res.writeHead(421, { "content-type": "text/plain" });
      return res.end(`no site fixture for host ${host}\n`);
    }
    const u = new URL(req.url, `https://${host}`);
    const a = assets[id];
    const send = (type, body, status = 200) => {
      res.writeHead(status, { "content-type": type + "; charset=utf-8", "cache-control": "no-store" });
      res.end(body);
    };
    if (a[u.pathname]) return send(...a[u.pathname]);
    if (u.pathname === "/_fixture/quill.core.css") return send("text/css", quillCss);
    if (u.pathname === "/favicon.ico") {
      res.writeHead(204, { "cache-control": "no-store" });
      return res.end();
    }
    if (u.pathname.startsWith("/_fixture/")) return send("text/plain", "not found\n", 404);
    const seed = JSON.stringify(seeds[id] || {}).replace(/</g, "\\u003c");
    send("text/html", a.index.replace("<head>", `<head>\n<script>window.__fixtureSeeds = ${seed};</script>`));
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const port = server.address().port;
  const sockets = new Set();
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });

  return {
    port,
    hosts,
    sites: Object.keys(SITES),
    hostResolverRules: hosts.map((h) => `MAP ${h} 127.0.0.1:${port}`).join(", "),
    /** https://HOST/path of a site (its main host name). */
    url(siteId, p = "/") {
      if (!SITES[siteId]) throw new Error(`no site ${siteId}`);
      return `https://${SITES[siteId][0]}${p}`;
    },
    /** A conversation served with the page (see above); path may carry a query. */
    seed(siteId, p, messages) {
      (seeds[siteId] ||= {})[p] = messages;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// `node serve.mjs` serves until interrupted (for a look in a browser)
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const s = await startSites();
  console.log(`port ${s.port}\nchromium --ignore-certificate-errors --host-resolver-rules="${s.hostResolverRules}"`);
  writeFileSync(path.join(tmpdir(), "toolhub-sites.port"), String(s.port));
}
