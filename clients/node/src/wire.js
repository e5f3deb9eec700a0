// The wire format of protocol v1: what the client checks before it writes
// a word (so that a name or value can never be read by the agent as another
// word or request), how it writes durations and values, and how it reads
// replies and pushes.
import { InvalidArgument, InvalidName } from './errors.js';

export const MAX_LINE = 4096; // a request line, tag included, without its LF
export const MAX_LIMIT = 4096;
export const MAX_VALUE_LEN = 512; // a value on the wire, percent-encoded
const DAY = 24 * 3600 * 1000;
export const MAX_WAIT = 365 * DAY; // the agent's bound on any duration
export const MAX_TTL = 30 * DAY; // the agent's bound on ttl= (protocol.MaxTTL)
export const MAX_DELAY = 5 * 60 * 1000;
export const MAX_MIN_HOLD = DAY;

const NAME = /^[A-Za-z0-9._:/@+-]{1,200}$/;
const OWNER = /^[A-Za-z0-9._:-]{1,64}$/;
const CLIENT_NAME = /^[A-Za-z0-9._:/@+-]{1,64}$/;
const AGENT_ID = /^[!-<>-~]{1,255}$/; // printable ASCII, no space, no '='
const REASON = /^[a-z0-9_]{1,32}$/;

const matches = (re, v) => typeof v === 'string' && re.test(v);

export function checkName(name) {
  if (!matches(NAME, name)) throw new InvalidName(name, '1-200 characters of [A-Za-z0-9._:/@+-]');
  return name;
}

export function checkOwner(owner) {
  if (!matches(OWNER, owner)) throw new InvalidArgument('owner', owner, '1-64 characters of [A-Za-z0-9._:-]');
  return owner;
}

export function checkClientName(name) {
  if (!matches(CLIENT_NAME, name)) {
    throw new InvalidArgument('clientName', name, '1-64 characters of [A-Za-z0-9._:/@+-]');
  }
  return name;
}

export function checkAgentId(agent) {
  if (!matches(AGENT_ID, agent)) {
    throw new InvalidArgument('agent', agent, 'an agent id: 1-255 printable characters, no space or =');
  }
  return agent;
}

export function checkReason(reason) {
  if (!matches(REASON, reason)) throw new InvalidArgument('reason', reason, 'one word of 1-32 of [a-z0-9_]');
  return reason;
}

/**
 * A duration in milliseconds (a finite number from `least` to `most`) as
 * whole milliseconds for the wire, rounded up so that a positive duration
 * never becomes 0.
 */
export function ms(argument, value, least, most, want) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < least || value > most) {
    throw new InvalidArgument(argument, value, want);
  }
  // Drop float noise (0.1 + 0.2) before rounding up.
  return String(Math.ceil(Math.round(value * 1e6) / 1e6));
}

export const waitMs = (wait) => ms('wait', wait, 0, MAX_WAIT,
  'milliseconds, 0 (try once) to one year, or undefined (wait forever)');
export const ttlMs = (ttl) => ms('ttl', ttl, Number.MIN_VALUE, MAX_TTL, 'milliseconds, more than 0 and at most 30 days');

export function checkLimit(limit, shared) {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new InvalidArgument('limit', limit, `an integer from 1 to ${MAX_LIMIT}`);
  }
  if (shared && limit > 1) throw new InvalidArgument('limit', limit, '1 with shared: true (a read lock is not a semaphore)');
  return limit;
}

export function checkBool(argument, value) {
  if (typeof value !== 'boolean') throw new InvalidArgument(argument, value, 'true or false');
  return value;
}

export function checkFence(fence) {
  const ok = (typeof fence === 'number' && Number.isSafeInteger(fence) && fence > 0) ||
    (typeof fence === 'bigint' && fence > 0n);
  if (!ok) throw new InvalidArgument('fence', fence, 'a positive integer (a number or a bigint)');
  return String(fence);
}

const VALUE_SAFE = new Set(Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@+=,-'));

/**
 * Any text (UTF-8 on the wire) or bytes, percent-encoded into what the
 * protocol takes as a value: [A-Za-z0-9._:/@+=%,-], every other byte (and
 * '%') as %XX.
 */
export function encodeValue(value) {
  const raw = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value);
  let out = '';
  for (const b of raw) out += VALUE_SAFE.has(b) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/**
 * A value read from the agent, decoded as UTF-8 text. A '%' that does not
 * start an escape (a value another client wrote unencoded) stays as it is.
 */
export function decodeValue(wire) {
  const bytes = [];
  for (let i = 0; i < wire.length; i++) {
    const hex = wire.slice(i + 1, i + 3);
    if (wire[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      bytes.push(wire.charCodeAt(i) & 0xff);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The value for the wire, encoded; at most 512 bytes once encoded. */
export function checkValue(value, argument = 'value') {
  if (typeof value !== 'string' && !(value instanceof Uint8Array)) {
    throw new InvalidArgument(argument, value, 'a string or a Uint8Array');
  }
  if (typeof value === 'string' && LONE_SURROGATE.test(value)) {
    throw new InvalidArgument(argument, value, 'text that can be UTF-8 encoded (no lone surrogate)');
  }
  const enc = encodeValue(value);
  if (enc.length > MAX_VALUE_LEN) {
    throw new InvalidArgument(argument, typeof value === 'string' ? value.slice(0, 40) : value,
      `at most ${MAX_VALUE_LEN} bytes once percent-encoded (${enc.length} here: each byte outside ` +
      '[A-Za-z0-9._:/@+=,-] takes three)');
  }
  return enc;
}

/** A line's key=value words as an object. */
export function fields(words) {
  const out = {};
  for (const w of words) {
    const i = w.indexOf('=');
    if (i >= 0) out[w.slice(0, i)] = w.slice(i + 1);
  }
  return out;
}

export const int = (v, dflt = 0) => (v !== undefined && /^-?\d+$/.test(v) ? Number(v) : dflt);
