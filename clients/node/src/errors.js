// Errors: one class per wire error code, plus the client's own. Compare
// with instanceof or by `code` (the agent's wire code, or the client's:
// BUSY, CLOSED, CONNECT, LOST).

/** An ERR reply from the agent, or a client-side failure; each class's static `code` is its default code. */
export class LockAgentError extends Error {
  static code = 'INTERNAL';

  constructor(message = new.target.code, code = new.target.code) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** The lock was not granted within its wait. */
export class Busy extends LockAgentError {
  static code = 'BUSY';
  constructor(message = 'the wait ran out') { super(message); }
}

export class BadRequest extends LockAgentError { static code = 'BAD_REQUEST'; }
export class UnknownVerb extends LockAgentError { static code = 'UNKNOWN_VERB'; }
export class BadName extends LockAgentError { static code = 'BAD_NAME'; }
export class NotHeld extends LockAgentError { static code = 'NOT_HELD'; }
export class NoQuorum extends LockAgentError { static code = 'NO_QUORUM'; }
export class Conflict extends LockAgentError { static code = 'CONFLICT'; }
/** The agent's cluster settings differ from those a majority of its masters records. */
export class SettingsDiffer extends LockAgentError { static code = 'SETTINGS'; }
export class Denied extends LockAgentError { static code = 'DENIED'; }
export class LimitReached extends LockAgentError { static code = 'LIMIT'; }
export class Cancelled extends LockAgentError { static code = 'CANCELLED'; }
export class ShuttingDown extends LockAgentError { static code = 'SHUTTING_DOWN'; }
export class InternalError extends LockAgentError { static code = 'INTERNAL'; }

/** Election.leader() found nobody leading (etcd's ErrElectionNoLeader). */
export class NoLeader extends LockAgentError {
  static code = 'NO_LEADER';
  constructor(message = 'election: no leader') { super(message); }
}

/** Election.proclaim() by an election that does not lead (etcd's ErrElectionNotLeader). */
export class NotLeader extends LockAgentError {
  static code = 'NOT_LEADER';
  constructor(message = 'election: not leader') { super(message); }
}

/** The connection to the agent is gone (closed by close(), or the agent went away). */
export class ConnectionClosed extends LockAgentError {
  static code = 'CLOSED';
  constructor(message = 'the connection to the agent is closed') { super(message); }
}

/** connect() could not reach the agent's socket; the message says what to do. */
export class ConnectError extends LockAgentError {
  static code = 'CONNECT';

  constructor(path, cause, defaultSocket, devSocket) {
    super(`cannot connect to the agent at ${path}: ${cause.message}; is the agent running? ` +
      'Start one with `lock-agent run -dev`, or set LOCK_AGENT_SOCKET to the socket it prints ' +
      `(without it, clients try ${defaultSocket}, then ${devSocket})`);
    this.path = path;
    this.cause = cause;
  }
}

const describe = (value) => {
  try {
    return typeof value === 'string' ? JSON.stringify(value) : String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
};

/**
 * The client refused an argument before sending anything: `argument` was
 * `value`, outside what the protocol accepts. Its code is BAD_REQUEST, as the
 * agent would have answered.
 */
export class InvalidArgument extends BadRequest {
  constructor(argument, value, want) {
    super(`invalid ${argument} ${describe(value)}: want ${want}`);
    this.argument = argument;
    this.value = value;
  }
}

/** A lock name the client refused before sending anything (code BAD_NAME). */
export class InvalidName extends BadName {
  constructor(value, want) {
    super(`invalid name ${describe(value)}: want ${want}`);
    this.argument = 'name';
    this.value = value;
  }
}

/**
 * A hold ended without unlock(). `reason`: quorum, expired, revoked,
 * shutdown (the agent's), disconnected (the connection closed), or unknown
 * (the agent answered NOT_HELD to an unlock without telling first).
 */
export class LockLost extends LockAgentError {
  static code = 'LOST';

  constructor(name, owner, fence, reason, why) {
    super(`lock ${name} lost: ${reason}${why ? ` (${why})` : ''}`);
    this.lockName = name;
    this.owner = owner;
    this.fence = fence;
    this.reason = reason;
    this.why = why;
  }
}

const byCode = new Map([BadRequest, UnknownVerb, BadName, NotHeld, NoQuorum, Conflict, SettingsDiffer,
  Denied, LimitReached, Cancelled, ShuttingDown, InternalError].map((cls) => [cls.code, cls]));

/** The error of an ERR reply's words (code, then text). */
export function errorFromReply(words) {
  const [code = 'INTERNAL', ...text] = words;
  const cls = byCode.get(code) ?? InternalError;
  return new cls(text.join(' ') || code);
}
