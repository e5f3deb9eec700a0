// lockagent: the Node client of lock-agent (distributed locks over a Unix
// socket). No dependencies; see README.md and index.d.ts.
export { Client, DEFAULT_SOCKET, connect, devSocketPath, socketPath } from './src/client.js';
export { Lock } from './src/lock.js';
export { Election } from './src/election.js';
export { decodeValue, encodeValue } from './src/wire.js';
export {
  BadName, BadRequest, Busy, Cancelled, Conflict, ConnectError, ConnectionClosed, Denied, InternalError,
  InvalidArgument, InvalidName, LimitReached, LockAgentError, LockLost, NoLeader, NoQuorum, NotHeld, NotLeader, SettingsDiffer,
  ShuttingDown, UnknownVerb,
} from './src/errors.js';
