// A LOCK request's options: checked, every one, before anything is sent,
// and written as the words of one request line.
import { InvalidArgument } from './errors.js';
import {
  MAX_DELAY, MAX_LINE, MAX_MIN_HOLD, checkBool, checkLimit, checkName, checkOwner, checkValue, ms, ttlMs, waitMs,
} from './wire.js';

const KNOWN = new Set(['wait', 'ttl', 'owner', 'shared', 'limit', 'fair', 'value', 'notifyWanted', 'delay',
  'minHold', 'signal']);

/** The names of a lockAll(): an array of at least one name, none twice. */
export function checkNames(names) {
  if (!Array.isArray(names)) throw new InvalidArgument('names', names, 'an array of names (lock() takes one name)');
  if (names.length === 0) throw new InvalidArgument('names', names, 'at least one name');
  const seen = new Set();
  for (const name of names) {
    checkName(name);
    if (seen.has(name)) throw new InvalidArgument('names', name, 'each name once');
    seen.add(name);
  }
  return names;
}

function checkSignal(signal) {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgument('signal', signal, 'an AbortSignal');
  }
  return signal;
}

/**
 * Refuses options that are not an object, or that name a key outside
 * known: a misspelt option would otherwise be dropped without a word (a
 * revoke's `agnet` would end the holds of every agent).
 */
export function checkOptions(options, known) {
  if (options === null || typeof options !== 'object') throw new InvalidArgument('options', options, 'an object');
  for (const key of Object.keys(options)) {
    if (!known.has(key)) throw new InvalidArgument('option', key, `one of ${[...known].join(', ')}`);
  }
  return options;
}

/**
 * The words a LOCK of `names` (already checked) by `owner` adds for
 * `options`, each checked; throws InvalidArgument for an unknown option or a
 * bad value.
 */
export function lockWords(options) {
  const o = checkOptions(options, KNOWN);
  const words = [];
  const given = (v) => v !== undefined;
  if (given(o.wait)) words.push(`wait=${waitMs(o.wait)}`);
  if (given(o.ttl)) words.push(`ttl=${ttlMs(o.ttl)}`);
  if (given(o.shared) && checkBool('shared', o.shared)) words.push('mode=shared');
  if (given(o.limit)) words.push(`limit=${checkLimit(o.limit, o.shared === true)}`);
  if (given(o.fair) && checkBool('fair', o.fair)) words.push('fair=true');
  if (given(o.value) && o.value !== '') words.push(`value=${checkValue(o.value)}`);
  if (given(o.notifyWanted) && checkBool('notifyWanted', o.notifyWanted)) words.push('notify=wanted');
  if (given(o.delay)) words.push(`delay=${ms('delay', o.delay, 0, MAX_DELAY, 'milliseconds, 0 to 300000 (5 minutes)')}`);
  if (given(o.minHold)) {
    words.push(`min_hold=${ms('minHold', o.minHold, 0, MAX_MIN_HOLD, 'milliseconds, 0 to 86400000 (24 hours)')}`);
  }
  checkSignal(o.signal);
  return words;
}

/** The LOCK line of names (checked) with an owner and the option words. */
export function lockLine(names, owner, words) {
  const line = ['LOCK', ...names, `owner=${checkOwner(owner)}`, ...words].join(' ');
  const most = MAX_LINE - 33; // the longest tag and its space
  if (line.length > most) {
    throw new InvalidArgument('request', `${line.slice(0, 40)}...`,
      `at most ${most} bytes in one line (${line.length} here): fewer or shorter names, or a shorter value`);
  }
  return line;
}
