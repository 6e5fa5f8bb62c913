'use strict';
// CouchDB-protocol test server for livesync-go's integration tests:
// express-pouchdb 4.2.0 over in-memory PouchDB 7.3.1, mounted in our own
// express app with five shims in front of it (DESIGN.md §7). Plain
// pouchdb-server is not usable: it crashes or answers in forms CouchDB
// clients (kivik, PouchDB) do not expect on the requests below.
//
//   node launcher.js PORT ADMIN PASS [HOST]
//
// Listens on HOST (default 127.0.0.1), keeps every database in memory,
// writes nothing to the working directory, and prints "listening PORT"
// once it accepts requests.

const os = require('os');
const path = require('path');
const fs = require('fs');
const express = require('express');
const expressPouchDB = require('express-pouchdb');
const PouchDB = require('pouchdb').plugin(require('pouchdb-adapter-memory'));

const [portArg, admin, pass, hostArg] = process.argv.slice(2);
const port = Number(portArg);
const host = hostArg || '127.0.0.1';
if (!Number.isInteger(port) || port <= 0 || !admin || !pass) {
  console.error('usage: node launcher.js PORT ADMIN PASS [HOST]');
  process.exit(2);
}

// Shim 4 (part): the log goes to a throwaway file, never the working directory.
const logPath = path.join(os.tmpdir(), `livesync-couchserver-${process.pid}.log`);
const log = (msg) => {
  try {
    fs.appendFileSync(logPath, `[${new Date().toISOString()}] ${msg}\n`);
  } catch (e) { /* a log that cannot be written is not a reason to stop */ }
};
process.on('exit', () => { try { fs.unlinkSync(logPath); } catch (e) { /* gone */ } });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));

const MemPouchDB = PouchDB.defaults({ adapter: 'memory' });

// Shim 1: full CouchDB mode, config in memory, no compression (it buffers
// continuous _changes when the client accepts gzip) and no Fauxton.
const pouchApp = expressPouchDB(MemPouchDB, {
  mode: 'fullCouchDB',
  inMemoryConfig: true,
  logPath,
  overrideMode: { exclude: ['compression', 'routes/fauxton'] },
});

// Shim 4 (part): keep serving when express-pouchdb emits an unhandled 'error'.
pouchApp.on('error', (err) => log(`express-pouchdb error: ${err && err.stack || err}`));
MemPouchDB.on('error', (err) => log(`pouchdb error: ${err && err.stack || err}`));
process.on('uncaughtException', (err) => log(`uncaught: ${err && err.stack || err}`));
process.on('unhandledRejection', (err) => log(`unhandled rejection: ${err && err.stack || err}`));

const app = express();
app.disable('x-powered-by');
const jsonBody = express.json({ limit: '1gb', type: () => true });

function sendJSON(res, status, body) {
  res.status(status).set('Content-Type', 'application/json').send(JSON.stringify(body) + '\n');
}
function sendError(res, err) {
  const status = (err && err.status) || 500;
  sendJSON(res, status, { error: (err && (err.name || err.error)) || 'unknown_error', reason: (err && (err.message || err.reason)) || String(err) });
}
const isDbName = (s) => !s.startsWith('_');
const db = (name) => new MemPouchDB(name);
async function dbExists(name) {
  const all = await MemPouchDB.allDbs();
  return all.includes(name);
}

// Shim 5: an anonymous database creation once an admin exists is a 401
// (express-pouchdb would reach a handler that crashes).
app.put('/:db', (req, res, next) => {
  const authed = !!req.headers.authorization || /(^|;\s*)AuthSession=/.test(req.headers.cookie || '');
  if (!authed && isDbName(req.params.db)) {
    return sendJSON(res, 401, { error: 'unauthorized', reason: 'You are not a server admin.' });
  }
  next();
});

// Shim 2: POST /{db}/_changes with a selector in the JSON body: move it into
// the query (filter=_selector&selector=<json>), the only form express-pouchdb reads.
app.post('/:db/_changes', jsonBody, (req, res, next) => {
  if (req.body && req.body.selector) {
    req.query.filter = '_selector';
    req.query.selector = JSON.stringify(req.body.selector);
    delete req.body.selector;
  }
  next();
});

// Shim 4: PUT /{db}/{doc}?new_edits=false answered {ok, id, rev} as CouchDB
// does (express-pouchdb answers []).
app.put(/^\/([^/_][^/]*)\/([^_].*)$/, (req, res, next) => {
  if (String(req.query.new_edits) !== 'false') return next();
  jsonBody(req, res, async (err) => {
    if (err) return sendError(res, err);
    const name = req.params[0];
    const id = req.params[1]; // express has decoded it
    try {
      if (!(await dbExists(name))) return sendJSON(res, 404, { error: 'not_found', reason: 'Database does not exist.' });
      const doc = Object.assign({}, req.body, { _id: id });
      if (!doc._rev) return sendJSON(res, 400, { error: 'bad_request', reason: 'new_edits=false needs a _rev' });
      const out = await db(name).bulkDocs([doc], { new_edits: false });
      const bad = (out || []).find((r) => r && r.error);
      if (bad) return sendJSON(res, bad.status || 400, { error: bad.name || bad.error, reason: bad.message || bad.reason });
      sendJSON(res, 201, { ok: true, id, rev: doc._rev });
    } catch (e) {
      sendError(res, e);
    }
  });
});

// openRevs reads the given revisions of a document like open_revs, asking
// for latest only for revisions that exist (see shim 3).
async function openRevs(d, id, revs, opts, latest) {
  let rows = await d.get(id, Object.assign({}, opts, { open_revs: revs }));
  if (latest && revs !== 'all') {
    const known = rows.filter((r) => r.ok).map((r) => r.ok._rev);
    const newest = known.length ? await d.get(id, Object.assign({}, opts, { open_revs: known, latest: true })) : [];
    const seen = new Set();
    rows = newest.filter((r) => r.ok && !seen.has(r.ok._rev) && seen.add(r.ok._rev))
      .concat(rows.filter((r) => !r.ok));
  }
  return rows;
}

// Shim 3 (also for _bulk_get): POST /{db}/_bulk_get?latest=true hits the
// same pouchdb-merge failure for an unknown revision and never answers, so
// it is answered here with the resolution above.
app.post('/:db/_bulk_get', jsonBody, async (req, res) => {
  const name = req.params.db;
  const flag = (k) => String(req.query[k]) === 'true';
  try {
    if (!(await dbExists(name))) return sendJSON(res, 404, { error: 'not_found', reason: 'Database does not exist.' });
    const d = db(name);
    const opts = { revs: flag('revs'), attachments: flag('attachments') };
    const results = [];
    for (const ref of (req.body && req.body.docs) || []) {
      let docs;
      try {
        docs = ref.rev
          ? (await openRevs(d, ref.id, [ref.rev], opts, flag('latest'))).map((r) => r.ok ? { ok: r.ok } : { error: { id: ref.id, rev: ref.rev, error: 'not_found', reason: 'missing' } })
          : [{ ok: await d.get(ref.id, opts) }];
      } catch (e) {
        docs = [{ error: { id: ref.id, rev: ref.rev || 'undefined', error: e.name || 'not_found', reason: e.message || 'missing' } }];
      }
      results.push({ id: ref.id, docs });
    }
    sendJSON(res, 200, { results });
  } catch (e) {
    sendError(res, e);
  }
});

// Shim 3: GET /{db}/{doc}?open_revs=… with Accept: multipart/mixed answered
// in multipart/mixed (the only form kivik parses). Unknown revisions are
// resolved first and `latest` is asked for only for known ones: pouchdb-merge
// throws on latest for an unknown rev and wedges the in-memory store.
app.get(/^\/([^/_][^/]*)\/([^_].*)$/, async (req, res, next) => {
  if (req.query.open_revs === undefined || !/multipart\/mixed/.test(req.headers.accept || '')) return next();
  const name = req.params[0];
  const id = req.params[1]; // express has decoded it
  const flag = (k) => String(req.query[k]) === 'true';
  try {
    if (!(await dbExists(name))) return sendJSON(res, 404, { error: 'not_found', reason: 'Database does not exist.' });
    const d = db(name);
    let revs = req.query.open_revs;
    if (revs !== 'all') revs = JSON.parse(revs);
    const opts = { revs: flag('revs'), conflicts: flag('conflicts'), attachments: flag('attachments') };
    const rows = await openRevs(d, id, revs, opts, flag('latest'));
    const boundary = 'livesync' + Math.random().toString(16).slice(2);
    // A missing revision is a part flagged error="true", as CouchDB sends it.
    const parts = rows.map((r) => r.ok
      ? `--${boundary}\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(r.ok)}\r\n`
      : `--${boundary}\r\nContent-Type: application/json; error="true"\r\n\r\n${JSON.stringify({ missing: r.missing })}\r\n`);
    res.status(200).set('Content-Type', `multipart/mixed; boundary="${boundary}"`).send(parts.join('') + `--${boundary}--`);
  } catch (e) {
    sendError(res, e);
  }
});

app.use(pouchApp);

// Keep the listener from failing the whole process on a client reset.
app.use((err, req, res, next) => { log(`route error: ${err && err.stack || err}`); if (!res.headersSent) sendError(res, err); });

// LiveSync's server settings (FORMAT.md §5.1): express-pouchdb uses
// max_document_size as its request body limit (100 kB when unset).
pouchApp.couchConfig.set('couchdb', 'max_document_size', 50000000, () => {});

pouchApp.couchConfig.set('admins', admin, pass, (err) => {
  if (err) {
    console.error('cannot set the admin:', err.message);
    process.exit(1);
  }
  const server = app.listen(port, host, () => console.log(`listening ${port}`));
  server.on('error', (e) => { console.error(`cannot listen on ${host}:${port}: ${e.message}`); process.exit(1); });
});
