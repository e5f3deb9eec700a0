// Test helper: real redis-servers on random loopback ports, and the real
// lock-agent (built from this repository) over them, bootstrapped so that
// its masters do not sit out a quarantine. Everything it starts, stop() ends.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '../index.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The agent's binary: $LOCK_AGENT_BIN, else built once per test process. */
let built;
export function agentBinary() {
  if (process.env.LOCK_AGENT_BIN) return process.env.LOCK_AGENT_BIN;
  if (built === undefined) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lagnb'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    built = path.join(dir, 'lock-agent');
    execFileSync('go', ['build', '-o', built, './cmd/lock-agent'], { cwd: ROOT, stdio: 'inherit' });
  }
  return built;
}

// Every process started here, so that none outlives a test process that
// ends without stopping its clusters (a failed before(), an uncaught error).
const started = new Set();
process.on('exit', () => {
  for (const p of started) {
    p.kill('SIGCONT');
    p.kill('SIGKILL');
  }
});

function track(proc) {
  started.add(proc);
  proc.once('exit', () => started.delete(proc));
  return proc;
}

const exited = (proc) => new Promise((resolve) => {
  if (proc.exitCode !== null || proc.signalCode !== null) resolve();
  else proc.once('exit', () => resolve());
});

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Resolves when the redis-server on port answers PING; false if proc exits first. */
async function redisAnswers(port, proc) {
  for (let pause = 1; proc.exitCode === null; pause = Math.min(2 * pause, 20)) {
    const pong = await new Promise((resolve) => {
      const s = net.createConnection({ port, host: '127.0.0.1' }, () => s.write('PING\r\n'));
      s.on('data', (d) => { s.destroy(); resolve(d.toString().startsWith('+PONG')); });
      s.on('error', () => resolve(false));
    });
    if (pong) return true;
    await new Promise((r) => setTimeout(r, pause)); // a poll: a starting redis-server sends no signal
  }
  return false;
}

/** A redis-server with no persistence on a random loopback port. */
async function startRedis(dir) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const proc = track(spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
      '--appendonly', 'no', '--protected-mode', 'no', '--loglevel', 'warning'], { stdio: 'ignore' }));
    if (await redisAnswers(port, proc)) return { proc, address: `127.0.0.1:${port}` };
    proc.kill('SIGKILL'); // another process took the port first
  }
  throw new Error('could not start redis-server');
}

/** Waits until the agent on socket answers STATUS with every master up. */
async function mastersUp(socket, agent, timeoutMs = 15000) {
  const deadline = performance.now() + timeoutMs;
  let last;
  for (let pause = 1; performance.now() < deadline && agent.exitCode === null; pause = Math.min(2 * pause, 20)) {
    try {
      const c = await connect({ path: socket });
      try {
        last = await c.status();
        if (last.masters.length > 0 && last.masters.every((m) => m.state === 'up')) return;
      } finally {
        await c.close();
      }
    } catch (err) {
      last = err.message;
    }
    await new Promise((r) => setTimeout(r, pause)); // a poll: STATUS is all there is to watch
  }
  throw new Error(`the agent's masters never all came up: ${JSON.stringify(last)}`);
}

/**
 * Starts `masters` redis-servers and an agent over them. `lock` is the
 * agent.hcl lock block's body (e.g. 'lease = "1s"').
 */
export async function startCluster({ masters = 3, lock = '' } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lagn'));
  const cluster = { dir, redis: [], agent: undefined, socket: path.join(dir, 'agent.sock') };
  cluster.stop = () => stopCluster(cluster);
  try {
    for (let i = 0; i < masters; i++) cluster.redis.push(await startRedis(dir));
    const config = path.join(dir, 'agent.hcl');
    writeFileSync(config, `agent { id = "node-test" }\nsocket { path = ${JSON.stringify(cluster.socket)} }\n` +
      `lock {\n${lock}\n}\n${cluster.redis.map((r, i) => `redis "m${i}" { address = "${r.address}" }\n`).join('')}`);
    execFileSync(agentBinary(), ['bootstrap', '-config', config], { stdio: 'ignore' });
    cluster.agent = track(spawn(agentBinary(), ['run', '-config', config], { stdio: ['ignore', 'ignore', 'pipe'] }));
    cluster.log = '';
    cluster.agent.stderr.on('data', (d) => { cluster.log += d; });
    await mastersUp(cluster.socket, cluster.agent);
  } catch (err) {
    await cluster.stop();
    throw new Error(`${err.message}\n${cluster.log ?? ''}`);
  }
  cluster.pause = (i) => cluster.redis[i].proc.kill('SIGSTOP');
  cluster.resume = (i) => cluster.redis[i].proc.kill('SIGCONT');
  cluster.killAgent = () => { cluster.agent.kill('SIGKILL'); return exited(cluster.agent); };
  return cluster;
}

async function stopCluster(cluster) {
  const procs = [cluster.agent, ...cluster.redis.map((r) => r.proc)].filter(Boolean);
  for (const p of procs) {
    p.kill('SIGCONT'); // a paused redis-server must run to die
    p.kill('SIGKILL');
  }
  await Promise.all(procs.map(exited));
  rmSync(cluster.dir, { recursive: true, force: true });
}
