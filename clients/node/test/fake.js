// A scripted agent on a Unix socket, for what the real agent cannot be made
// to do on cue, and to prove what a client wrote (and did not write).
// HELLO is always answered OK; answer(verb, args) gives the other replies,
// without the tag (a line that starts with "* " is a push, sent as it is).
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export function grantAll(verb, args) {
  if (verb === 'LOCK') {
    const names = args.filter((a) => !a.includes('='));
    return [`OK fence=${names.map((_, i) => 7 + i).join(',')} validity=1000 count=${names.map(() => 1).join(',')}`];
  }
  if (verb === 'UNLOCK') return ['OK count=0'];
  return ['OK'];
}

export async function startFake(answer = grantAll) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lagf'));
  const fake = { path: path.join(dir, 'fake.sock'), requests: [], answer, sockets: new Set() };
  const server = net.createServer((socket) => {
    fake.sockets.add(socket);
    socket.on('close', () => fake.sockets.delete(socket));
    socket.on('error', () => {});
    let buffer = '';
    socket.on('data', (chunk) => {
      buffer += chunk;
      let end;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const words = buffer.slice(0, end).split(' ').filter(Boolean);
        buffer = buffer.slice(end + 1);
        if (words.length >= 2) socket.write(serve(fake, words));
      }
    });
  });
  await new Promise((resolve) => server.listen(fake.path, resolve));
  fake.close = async () => {
    for (const s of fake.sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  };
  return fake;
}

function serve(fake, [tag, verb, ...args]) {
  let replies = ['OK proto=1 agent=fake session=1 masters=3 quorum=2'];
  if (verb.toUpperCase() !== 'HELLO') {
    fake.requests.push([verb, ...args].join(' '));
    replies = fake.answer(verb.toUpperCase(), args);
  }
  return replies.map((r) => (r.startsWith('* ') ? r : `${tag} ${r}`)).join('\n') + (replies.length ? '\n' : '');
}
