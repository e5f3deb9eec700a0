// Takes a lock, works under it, hands it back; then wins an election and
// asks who leads. Run it against `lock-agent run -dev`:
//   node clients/node/examples/basic.js
import { connect } from '../index.js';

const client = await connect(); // $LOCK_AGENT_SOCKET, else the system agent's socket, else the -dev agent's
try {
  const lock = await client.lock('reports/nightly', { wait: 5000 });
  lock.on('lost', (err) => console.error(`lost ${err.lockName}: ${err.reason}`));
  try {
    // Work here; pass lock.fence to what the lock protects, and stop when lock.signal aborts.
    console.log(`holding ${lock.name}, fence ${lock.fence}`);
  } finally {
    await lock.unlock();
  }

  const term = await client.campaign('service/primary', 'http://host-a:8080/');
  const leader = await client.leader('service/primary');
  console.log(`elected, term ${term.fence}; the leader is at ${leader.value}`);
  await term.unlock(); // resign
} finally {
  await client.close();
}
