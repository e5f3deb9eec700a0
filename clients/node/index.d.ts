// Type declarations of the lockagent Node client, written by hand to match
// index.js (test/declarations.test.js checks that every export and every
// public member declared here exists, and the reverse).
/// <reference types="node" />
import { EventEmitter } from 'node:events';

/** The socket of a system agent. */
export declare const DEFAULT_SOCKET: '/run/lock-agent/agent.sock';
/** Where `lock-agent run -dev` listens: $XDG_RUNTIME_DIR/lock-agent/agent.sock, else $TMPDIR/lock-agent-UID/agent.sock. */
export declare function devSocketPath(): string;
/** $LOCK_AGENT_SOCKET; else DEFAULT_SOCKET if it exists; else devSocketPath(). */
export declare function socketPath(): string;

export interface ConnectOptions {
  /** The agent's socket; default socketPath(). */
  path?: string;
  /** The name the agent logs for this connection (1-64 of [A-Za-z0-9._:/@+-]); default the script's name. */
  clientName?: string;
}

/** Connects to the agent and says HELLO; rejects with ConnectError when nothing answers. */
export declare function connect(options?: ConnectOptions): Promise<Client>;

/** Every duration is in milliseconds (fractions are rounded up to whole milliseconds). */
export interface LockOptions {
  /** How long to wait for the grant: 0 tries once; default forever (at most one year). */
  wait?: number;
  /** The hold ends this long after the grant unless extended (more than 0, at most 30 days); default: kept while connected. */
  ttl?: number;
  /** Holds of one owner re-enter; default a new owner for each call (1-64 of [A-Za-z0-9._:-]). */
  owner?: string;
  /** A read hold: any number at once, none while an exclusive one is held. */
  shared?: boolean;
  /** A semaphore of `limit` slots (1-4096); every holder must pass the same limit. */
  limit?: number;
  /** Grant in arrival order across agents. */
  fair?: boolean;
  /** Text (UTF-8) or bytes stored with the hold, at most 512 bytes percent-encoded. */
  value?: string | Uint8Array;
  /** Emit 'wanted' when a conflicting request starts waiting. */
  notifyWanted?: boolean;
  /** After an unclean end the name stays unavailable this long (0-300000); default the agent's lock.lock_delay. */
  delay?: number;
  /** An unlock before this long after the grant keeps the name held by nobody until then (0-86400000). */
  minHold?: number;
  /** Aborting gives up the wait: it is cancelled at the agent and a racing grant released; rejects with signal.reason. */
  signal?: AbortSignal;
}

export interface Leader {
  name: string;
  /** True while nobody leads; fence is then 0, value and agent undefined. */
  none: boolean;
  /** The leader's term: strictly increasing per name. */
  fence: number;
  value: string | undefined;
  /** The agent.id of the leader's agent. */
  agent: string | undefined;
}

export interface Master { name: string; address: string; state: string }
export interface Status { agent: string; sessions: number; holds: number; waiters: number; quorum: number; masters: Master[] }
export interface HoldInfo {
  name: string; owner: string; fence: number; count: number; mode: 'exclusive' | 'shared';
  /** Milliseconds. */
  validity: number;
  /** 0 for a lock. */
  limit: number;
  /** 0 for a lock. */
  slot: number;
}
export interface Holder {
  agent: string; pid: number; uid: number; owner: string; mode: 'exclusive' | 'shared'; fence: number; since: Date;
  limit: number; slot: number; value: string | undefined;
}
export interface Waiting { agent: string; count: number; since: Date }
export interface Occupancy {
  holders: Holder[];
  waiting: Waiting[];
  /** Waiters in the name's queue across agents; -1 when the agent does not say. */
  queued: number;
  /** While a delay or minHold keeps the name from everyone, when that ends. */
  delayedUntil: Date | undefined;
}
export interface RevokeOptions {
  /** Only the holds of this agent (its agent.id). */
  agent?: string;
  /** A word (1-32 of [a-z0-9_]) each holder's LockLost carries as `why`. */
  reason?: string;
}

export declare class Client implements AsyncDisposable {
  private constructor();
  /** The agent's id for this connection. */
  session: string | undefined;
  /** Resolves when the connection to the agent is gone. */
  readonly closed: Promise<void>;
  /** Closes the connection; the agent releases every hold of it. */
  close(): Promise<void>;
  /** Ends the connection at once. */
  destroy(): void;
  /** Closes the connection (`await using client = await connect()`). */
  [Symbol.asyncDispose](): Promise<void>;
  ping(): Promise<void>;
  /** Acquires name; rejects with Busy when the wait ran out, signal.reason when aborted, InvalidArgument before sending anything. */
  lock(name: string, options?: LockOptions): Promise<Lock>;
  /** Acquires every name or none; one Lock per name, in the order given. */
  lockAll(names: string[], options?: LockOptions): Promise<Lock[] & AsyncDisposable>;
  /** Runs for leader: a fair lock carrying value. */
  campaign(name: string, value: string | Uint8Array, options?: Omit<LockOptions, 'fair' | 'value'>): Promise<Lock>;
  /** The leaders of name: the one read after the call began, then every change, until signal aborts or the loop breaks. */
  observe(name: string, options?: { signal?: AbortSignal }): Promise<AsyncGenerator<Leader, void, undefined>>;
  /** The current leader of name, read after the call began (`none: true` while there is none). */
  leader(name: string, options?: { signal?: AbortSignal }): Promise<Leader>;
  /**
   * Whether fence is a current holder's fence, as a majority of masters records it. For a name
   * cached by another agent, a fence whose holder let go may read current for up to a renewal tick
   * (see docs/protocol.md, CHECK); to refuse a holder the moment it lets go, compare fences.
   */
  check(name: string, fence: number | bigint): Promise<boolean>;
  /** Ends the holds of name wherever they are (an operator's verb); resolves with how many. */
  revoke(name: string, options?: RevokeOptions): Promise<number>;
  status(): Promise<Status>;
  holds(): Promise<HoldInfo[]>;
  who(name: string): Promise<Holder[]>;
  occupancy(name: string): Promise<Occupancy>;
}

export interface LockEvents {
  lost: [LockLost];
  wanted: [{ waiting: number }];
}

/** A held lock: 'lost' and 'wanted' events, `lost` as a promise, `signal` aborted when it ends. */
export declare class Lock extends EventEmitter<LockEvents> implements AsyncDisposable {
  private constructor();
  readonly name: string;
  readonly owner: string;
  /** The fencing token: strictly greater than every earlier grant's of the name. */
  readonly fence: number;
  /** The re-entry count at the grant or unlock. */
  readonly count: number;
  /** A semaphore hold's slot (1 to its limit); 0 for a lock. */
  readonly slot: number;
  readonly value: string | Uint8Array | undefined;
  readonly state: 'waiting' | 'held' | 'unlocked' | 'lost';
  /** The LockLost, once the hold was lost. */
  readonly error: LockLost | undefined;
  /** Resolves with the LockLost when the hold is lost; never if it is unlocked. */
  readonly lost: Promise<LockLost>;
  /** Aborted when the hold ends (reason: the LockLost, or a NotHeld after unlock()). */
  readonly signal: AbortSignal;
  /** Milliseconds the hold is known valid from now, as of its grant or last extend(). */
  readonly validity: number;
  readonly held: boolean;
  /** Releases this hold; rejects with the LockLost if it was lost, NotHeld if already unlocked. */
  unlock(): Promise<void>;
  /** Sets the end to ttl ms from now; resolves with the new validity. */
  extend(ttl: number): Promise<number>;
  /** Replaces the hold's value; resolves once a majority has it. */
  proclaim(value: string | Uint8Array): Promise<void>;
  /** Releases the hold if held; rejects with the LockLost if it was lost. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A leader election shaped as etcd's concurrency.Election: every Election of
 * one name on one client is one candidate; campaign() resolves at once while
 * it leads (proclaiming a new value); resign() when not leading resolves;
 * leader() with nobody leading rejects with NoLeader; proclaim() when not
 * leading rejects with NotLeader; observe() yields leaders only.
 */
export declare class Election {
  constructor(client: Client, name: string, options?: Omit<LockOptions, 'fair' | 'value' | 'signal'>);
  readonly name: string;
  /** This candidate's term (its hold's fence) while it leads, else 0. */
  readonly rev: number;
  /** The Lock of this candidate's term while it leads. */
  readonly lock: Lock | undefined;
  campaign(value: string | Uint8Array, options?: Omit<LockOptions, 'fair' | 'value'>): Promise<void>;
  proclaim(value: string | Uint8Array): Promise<void>;
  resign(): Promise<void>;
  leader(options?: { signal?: AbortSignal }): Promise<Leader>;
  observe(options?: { signal?: AbortSignal }): AsyncGenerator<Leader, void, undefined>;
}

export declare function encodeValue(value: string | Uint8Array): string;
export declare function decodeValue(wire: string): string;

/** An ERR reply, or a client-side failure; `code` is the wire code or BUSY, CLOSED, CONNECT, LOST. */
export declare class LockAgentError extends Error {
  /** The code of this class's errors. */
  static readonly code: string;
  constructor(message?: string, code?: string);
  code: string;
}
export declare class Busy extends LockAgentError {}
export declare class BadRequest extends LockAgentError {}
export declare class UnknownVerb extends LockAgentError {}
export declare class BadName extends LockAgentError {}
export declare class NotHeld extends LockAgentError {}
/** Election.leader() found nobody leading; code NO_LEADER. */
export declare class NoLeader extends LockAgentError {}
/** Election.proclaim() when not leading; code NOT_LEADER. */
export declare class NotLeader extends LockAgentError {}
export declare class NoQuorum extends LockAgentError {}
export declare class Conflict extends LockAgentError {}
export declare class SettingsDiffer extends LockAgentError {}
export declare class Denied extends LockAgentError {}
export declare class LimitReached extends LockAgentError {}
export declare class Cancelled extends LockAgentError {}
export declare class ShuttingDown extends LockAgentError {}
export declare class InternalError extends LockAgentError {}
export declare class ConnectionClosed extends LockAgentError {}
export declare class ConnectError extends LockAgentError {
  path: string;
}
/** Refused before anything was sent; code BAD_REQUEST. */
export declare class InvalidArgument extends BadRequest {
  argument: string;
  value: unknown;
}
/** A name refused before anything was sent; code BAD_NAME. */
export declare class InvalidName extends BadName {
  argument: 'name';
  value: unknown;
}
export declare class LockLost extends LockAgentError {
  lockName: string;
  owner: string;
  fence: number;
  /** quorum, expired, revoked, shutdown, disconnected, or unknown. */
  reason: string;
  /** A revoked hold's reason word. */
  why: string | undefined;
}
