# Production lock-agent configuration for three independent Redis masters.
# Install as /etc/lock-agent/agent.hcl; check with `lock-agent validate -config`.

socket {
  path  = "/run/lock-agent/agent.sock" # RuntimeDirectory=lock-agent in the unit creates /run/lock-agent
  mode  = "0660"
  group = "lockers" # members of lockers may take locks
}

# Three masters on three hosts (no replication between them): any two make a quorum.
redis "a" {
  address       = "redis-a.internal:6379"
  username      = "lock-agent"
  password_file = "/etc/lock-agent/redis.pass"
}
redis "b" {
  address       = "redis-b.internal:6379"
  username      = "lock-agent"
  password_file = "/etc/lock-agent/redis.pass"
}
redis "c" {
  address       = "redis-c.internal:6379"
  username      = "lock-agent"
  password_file = "/etc/lock-agent/redis.pass"
}
# A master may instead be a whole Redis Cluster, one vote for all its shards:
# list two or three of its nodes as seeds (the agent learns the others). TLS
# and credentials go with it as above; db must be 0, and lock.key_prefix may
# not hold { or } (docs/operations.md, "Redis Cluster masters").
# redis "c" {
#   cluster       = ["redis-c1.internal:7000", "redis-c2.internal:7000", "redis-c3.internal:7000"]
#   username      = "lock-agent"
#   password_file = "/etc/lock-agent/redis.pass"
# }

lock {
  lease          = "15s"
  master_timeout = "50ms"
  # After a hold ends uncleanly (its process died, its session closed without
  # UNLOCK, LOST, REVOKE), keep its name from everyone for this long: for
  # resources that cannot check fences. A LOCK's delay= overrides it.
  # lock_delay = "5s"
}

log {
  format = "json"
}

# Metrics for Prometheus on loopback (docs/operations.md, "Metrics").
telemetry {
  prometheus_listen = "127.0.0.1:9464"
}
