// What STATUS, HOLDS and WHO answer, as plain objects.
import { decodeValue, int } from './wire.js';

export function statusOf(reply) {
  const f = reply.fields;
  return {
    agent: f.agent,
    sessions: int(f.sessions),
    holds: int(f.holds),
    waiters: int(f.waiters),
    quorum: int(f.quorum),
    masters: reply.data.map((d) => ({ name: d.master, address: d.address, state: d.state })),
  };
}

export function holdsOf(reply) {
  return reply.data.map((d) => ({
    name: d.name, owner: d.owner ?? '', fence: int(d.fence), count: int(d.count), mode: d.mode,
    validity: int(d.validity), limit: int(d.limit), slot: int(d.slot),
  }));
}

function holderOf(d) {
  return {
    agent: d.agent, pid: int(d.pid, -1), uid: int(d.uid, -1), owner: d.owner ?? '', mode: d.mode,
    fence: int(d.fence), since: new Date(int(d.since)), limit: int(d.limit), slot: int(d.slot),
    value: d.value === undefined ? undefined : decodeValue(d.value),
  };
}

/** WHO's answer: holders, the agents whose requests wait, the fair queue's length (-1 unknown), a delay. */
export function occupancyOf(reply) {
  const out = { holders: [], waiting: [], queued: int(reply.fields.queued, -1), delayedUntil: undefined };
  for (const d of reply.data) {
    if (d[''] === 'waiting') {
      out.waiting.push({ agent: d.agent, count: int(d.count), since: new Date(int(d.since)) });
    } else if (d.delayed_until !== undefined) {
      out.delayedUntil = new Date(int(d.delayed_until));
    } else if (d[''] === undefined) {
      out.holders.push(holderOf(d));
    }
  }
  return out;
}
