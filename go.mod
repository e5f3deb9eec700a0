module github.com/lock-agent/lock-agent

go 1.26.8

require (
	github.com/hashicorp/go-hclog v1.6.3
	github.com/redis/rueidis v1.0.79
)

require (
	github.com/fatih/color v1.13.0 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
