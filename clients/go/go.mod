module github.com/lock-agent/lock-agent/clients/go

go 1.23
