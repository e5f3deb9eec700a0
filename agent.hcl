# lock-agent sample configuration. Every attribute is optional unless marked
# required; the values shown are the defaults a production host gets.
# Check a file with:  lock-agent validate -config agent.hcl

agent {
  # Identity of this agent in the masters (shown by WHO). Default: the host name.
  id = "web-7"
}

socket {
  # Where clients connect. systemd's RuntimeDirectory=lock-agent creates /run/lock-agent.
  path = "/run/lock-agent/agent.sock"
  # File mode of the socket; the owner must be able to read and write it.
  mode = "0660"
  # Group owning the socket: members may lock. Default: the agent's own group.
  # group = "lockers"
}

# One block per independent Redis master: no replication between them. At
# least one; an odd number (3 or 5) is what RedLock wants. The quorum
# is a majority of the blocks: 3 tolerate one master out, 5 two, 1 none (an
# even number no more than one fewer; docs/operations.md, "How many masters").
# Persistence is not required: a master that
# restarts (empty, or from a snapshot) sits out one lease + drift (15.26s by
# default) before it votes again (see docs/operations.md, "The masters").
redis "a" {
  address = "10.0.0.11:6379" # host:port; or sentinels and master_set, or cluster (below)
  # username = "lock-agent"  # Redis ACL user
  # password = "..."         # or: password_file = "/etc/lock-agent/redis-a.pass"
  db = 0
  # A master with replicas attached is refused (a failover would promote one
  # that missed the last grants), unless max_replica_lag is set (replicas that
  # may be promoted behind this address, under the guard described for
  # sentinels below), or allow_replicas: only for a backup replica that is
  # never promoted. A replica, and any maxmemory-policy but noeviction, are
  # always refused.
  # max_replica_lag = "1s"
  allow_replicas = false
  # tls {
  #   ca_file     = "/etc/lock-agent/ca.pem"
  #   cert_file   = "/etc/lock-agent/client.pem"
  #   key_file    = "/etc/lock-agent/client-key.pem"
  #   server_name = "redis-a.internal"
  # }
}
redis "b" { address = "10.0.0.12:6379" }
redis "c" { address = "10.0.0.13:6379" }
# A master may instead be a primary with replicas that Sentinel fails over:
# the agent asks the Sentinels where the primary of master_set is and follows
# a failover; a promoted replica sits out the quarantine plus max_replica_lag
# (default "1s") + 2.1s. Every primary and replica needs min-replicas-to-write
# (at least its number of replicas) and min-replicas-max-lag (at most
# max_replica_lag), or it is unsafe: an old primary cut off from the others
# then stops taking writes before the promoted one votes (docs/operations.md,
# "Replicas and Sentinel failover"). allow_replicas does not go with it.
# redis "c" {
#   sentinels         = ["10.0.0.21:26379", "10.0.0.22:26379", "10.0.0.23:26379"]
#   master_set        = "locks-c"
#   # sentinel_password = "..." # if the Sentinels want auth (sentinel_username too)
#   max_replica_lag   = "1s"
# }
# Or a whole Redis Cluster may be one master (one vote): cluster lists seed
# nodes, any two or three of its nodes; the agent learns the shards from them.
# username, password and tls go with it as with address; db must be 0 (a
# cluster has no other); allow_replicas and max_replica_lag are about each
# shard's replicas; lock.key_prefix may not then hold { or } (docs/operations.md,
# "Redis Cluster masters").
# redis "c" {
#   cluster = ["10.0.0.31:7000", "10.0.0.32:7000", "10.0.0.33:7000"]
# }

lock {
  # lease, drift_factor and the cohort_max_* bounds are cluster settings: every
  # master records them, and an agent whose settings differ from those a
  # majority records grants nothing (ERR SETTINGS). Change them on a running
  # cluster with `lock-agent settings -config NEW -apply` (docs/operations.md,
  # "Cluster settings"), not by editing one agent's file.
  #
  # Watchdog lease: holds without ttl= are renewed every lease/3 while their
  # client stays connected. A crashed agent's holds free up after one lease.
  lease = "15s"
  # Every key the agent writes starts with this. No { or } in it when a
  # master is a Redis Cluster (a hash tag here would put every name in one slot).
  key_prefix = "lock-agent:"
  # Clock drift allowance: validity = lease - elapsed - lease*drift_factor - 2ms.
  drift_factor = 0.01
  # The least a round waits for one master's answer: each master's timeout
  # follows its answers' times (up to 10x this); past it a round waits on for
  # a master heard from lately (a slow one is not a dead one), up to
  # max(20x this, 1s). Must be well under lease/9.
  master_timeout = "50ms"
  # Jittered back-off between attempts that failed without a clear holder
  # (split votes, no quorum, release messages that freed nothing): it doubles
  # from retry_min up to retry_max (at least 100ms) while attempts keep failing.
  retry_min = "20ms"
  retry_max = "200ms"
  # (max_ttl is deprecated, accepted and ignored, and validate says so: ttl=
  # goes from 50ms to 30 days whatever it says. A ttl= hold is renewed like
  # any other until its end, so its length does not lengthen the quarantine
  # of a master that restarts empty (one lease). To cap a hold, give ttl=.)
  # The delay= of a LOCK that gives none (at most 5m; "0": none): after a hold
  # ends uncleanly (session closed without UNLOCK, process or agent died, LOST,
  # REVOKE) its name stays unavailable to everyone that long, so the next holder
  # does not touch a resource the dead holder may still be writing. UNLOCK ends
  # a hold at once. Holds with a delay end in a round of their own.
  lock_delay = "0"
  # Lock cohorting: a released exclusive lock (no ttl=, no limit=, not shared)
  # whose next local waiter wants the same goes straight to that waiter, without
  # a release and an acquire on the masters; the new holder gets the next fence of
  # a block the grant reserved (cohort_max_handoffs+1 fences), so fences still
  # grow across agents. A run of local holders reserves further blocks as it goes,
  # for up to 250ms, then ends with a real release when its block is used up;
  # while another agent waits for the name, it ends after cohort_max_handoffs
  # hand-overs or at the first release after cohort_max_hold. The defaults keep a
  # waiter on another agent under ~50ms. 0 in either turns cohorting off.
  cohort_max_handoffs = 128
  cohort_max_hold     = "20ms"
  # Lock caching: after the last local holder of a name (exclusive or shared; no
  # ttl=, limit=, fair=, delay=, min_hold=, value=, notify=) lets go, the agent keeps
  # its record in the masters this long and answers the next local LOCK of it with
  # no round on the masters. Only names in use again are kept: one whose LOCK came
  # within this long of the agent's last release of it. Another agent that wants
  # the name ends it at once. 0 turns caching off.
  cache_linger = "1s"
}

# SIGHUP applies new limits at once, to the requests that follow.
limits {
  max_sessions          = 10000  # connections at once
  max_holds_per_session = 1000   # names one connection may hold or wait for
  max_waiters           = 100000 # waiting LOCKs in the whole agent
  max_sessions_per_uid  = 1000   # connections at once of one peer uid
  # Close a session that has no hold, no waiting LOCK and sent no request for
  # this long (it is told "* BYE reason=idle"). Default: never.
  # idle_timeout = "10m"
}

log {
  level  = "info" # trace, debug, info, warn, error
  format = "text" # text or json
}

# Access rules by the client's credentials (SO_PEERCRED). Without an acl block,
# whoever can open the socket may do anything. With one, LOCK, UNLOCK, EXTEND
# and WHO are allowed only when, for every name they carry, some rule is for
# the client's uid or one of its groups (primary or supplementary), lists the
# verb, and has a glob that matches the name; else ERR DENIED says why. STATUS,
# PING, HELLO, HOLDS, CANCEL and QUIT are always allowed. Users and groups are
# looked up at start and on SIGHUP, which applies new rules at once.
# acl {
#   rule "batch" {
#     group = "batch"                  # or user = "alice", uid = 1001, gid = 1001: exactly one
#     names = ["jobs/*", "reports/**"] # * within one /-segment, ** across segments
#     verbs = ["lock", "unlock", "extend", "who"] # default: these and set, observe, check
#   }
#   rule "ops" {
#     user  = "root"
#     names = ["**"]                   # every name
#     verbs = ["who", "revoke"]        # revoke (REVOKE, lock-agent revoke) only when named:
#   }                                  # a rule without verbs never grants it; without an
# }                                    # acl block only uid 0 may revoke

# Only used when systemd runs the agent as a Type=notify service (see
# examples/systemd and docs/operations.md); otherwise ignored.
systemd {
  # READY=1 is sent once the socket listens and a quorum of masters is up,
  # or after this long with STATUS= saying there is no quorum (the agent
  # then serves, and its LOCKs fail with NO_QUORUM until masters return).
  # Keep it under the unit's TimeoutStartSec.
  ready_timeout = "30s"
}

# Metrics for Prometheus (docs/operations.md, "Metrics"). Opt-in: without
# prometheus_listen nothing is served. They are served as GET /metrics on
# their own TCP listener, never on the client socket. They carry no lock
# names, owners or pids, but they show the load: keep the listener on
# loopback or a management network.
telemetry {
  # prometheus_listen = "127.0.0.1:9464"
}
