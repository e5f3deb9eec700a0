package main

import (
	"fmt"
	"io"
)

func execCmd(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "lock-agent exec: not built yet")
	return exitUsage
}

func statusCmd(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "lock-agent status: not built yet")
	return exitUsage
}

func whoCmd(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "lock-agent who: not built yet")
	return exitUsage
}
