// One connection to the agent: requests by tag, their replies (with the
// DATA lines before them), and pushes, read by one reader. Everything that
// needs the agent goes through it; it knows nothing of locks.
import net from 'node:net';
import { Busy, ConnectError, ConnectionClosed, InternalError, errorFromReply } from './errors.js';
import { fields } from './wire.js';

/** A final reply: kind (OK, BUSY, ERR), its words, key=value fields, and the DATA lines before it. */
export class Reply {
  constructor(kind, words, data) {
    this.kind = kind;
    this.words = words;
    this.fields = fields(words);
    this.data = data;
  }

  /** The error this reply means, or undefined for OK. */
  error() {
    if (this.kind === 'OK') return undefined;
    if (this.kind === 'BUSY') return new Busy();
    if (this.kind === 'ERR') return errorFromReply(this.words);
    return new InternalError(`unexpected reply ${this.kind}`);
  }
}

/** Opens a Unix socket at path, or rejects with a ConnectError that says what to do. */
export function open(path, hints) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path });
    socket.once('connect', () => { socket.removeAllListeners('error'); resolve(socket); });
    socket.once('error', (err) => reject(new ConnectError(path, err, ...hints)));
  });
}

export class Connection {
  #socket;
  #buffer = '';
  #calls = new Map(); // tag -> { resolve, reject, data, then }
  #nextTag = 0;
  #onPush;
  #onClose;
  closed = false;

  /** onPush(words after '*'); onClose() once the connection is gone, after every pending call failed. */
  constructor(socket, onPush, onClose) {
    this.#socket = socket;
    this.#onPush = onPush;
    this.#onClose = onClose;
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => this.#read(chunk));
    socket.on('error', () => {}); // 'close' follows and says it all
    socket.on('close', () => this.#shutdown());
  }

  #read(chunk) {
    this.#buffer += chunk;
    let end;
    while ((end = this.#buffer.indexOf('\n')) >= 0) {
      const line = this.#buffer.slice(0, end).replace(/\r$/, '');
      this.#buffer = this.#buffer.slice(end + 1);
      this.#route(line);
    }
  }

  #route(line) {
    const words = line.split(' ').filter((w) => w !== '');
    if (words.length < 2) return;
    if (words[0] === '*') {
      this.#onPush(words.slice(1));
      return;
    }
    const [tag, kind, ...rest] = words;
    const call = this.#calls.get(tag);
    if (call === undefined) return;
    if (kind === 'DATA') {
      const d = fields(rest);
      if (rest.length > 0 && !rest[0].includes('=')) d[''] = rest[0]; // what the line is about: WHO's "DATA waiting ..."
      call.data.push(d);
      return;
    }
    this.#calls.delete(tag);
    const reply = new Reply(kind, rest, call.data);
    call.then?.(reply); // in the reader, before any later line is routed
    call.resolve(reply);
  }

  #shutdown() {
    if (this.closed) return;
    this.closed = true;
    const calls = [...this.#calls.values()];
    this.#calls.clear();
    for (const call of calls) call.reject(new ConnectionClosed());
    this.#onClose();
  }

  /**
   * Writes one request; returns its tag and a promise of its final reply
   * (rejected with ConnectionClosed if the connection ends first). `then`,
   * if given, sees the reply in the reader, before any line after it.
   */
  send(line, then) {
    if (this.closed) throw new ConnectionClosed();
    const tag = String(++this.#nextTag);
    const reply = new Promise((resolve, reject) => this.#calls.set(tag, { resolve, reject, data: [], then }));
    this.#socket.write(`${tag} ${line}\n`);
    return { tag, reply };
  }

  /** Sends a request and resolves with its OK reply; rejects with the error any other reply means. */
  async do(line) {
    const reply = await this.send(line).reply;
    const err = reply.error();
    if (err) throw err;
    return reply;
  }

  /** Closes the connection and resolves once it is gone. */
  close() {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.#socket.once('close', resolve);
      this.#socket.end();
    });
  }

  /** Ends the connection at once (without waiting for the agent to read what was written). */
  destroy() { this.#socket.destroy(); }
}
