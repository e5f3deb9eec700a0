package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/lock-agent/lock-agent/internal/buildinfo"
)

// The completions and the man page are made from the same text as -h: the
// commands table for the verbs, and each command's own -h output for its
// flags and its section of the page. A flag missing from -h is missing
// from them too (TestCompletionKnowsEveryExecFlag keeps exec's honest).

// helpOf is what `lock-agent NAME -h` prints.
func helpOf(c command) string {
	var out bytes.Buffer
	c.run([]string{"-h"}, &out, io.Discard)
	return out.String()
}

// flagLine is a help line that documents flags: "  -x, -e, --exclusive  take ..."
// or, from flag.PrintDefaults, "  -config string".
var flagLine = regexp.MustCompile(`^ {2,4}-`)

// flagsOf are the flags command c's -h documents, as written ("-json",
// "--timeout", "-w"), in order. elect takes exec's flags too, as its -h says.
func flagsOf(c command) []string {
	var flags, refused []string
	text := helpOf(c)
	if c.name == "elect" {
		// "but not -shared, -limit, -F or several names."
		for _, line := range strings.Split(text, "\n") {
			if rest, ok := strings.CutPrefix(line, "but not "); ok {
				for _, word := range strings.Fields(strings.NewReplacer(",", " ", ".", " ").Replace(rest)) {
					if strings.HasPrefix(word, "-") {
						refused = append(refused, word)
					}
				}
			}
		}
		exec, _ := lookupCommand("exec")
		text += helpOf(exec)
	}
	for _, line := range strings.Split(text, "\n") {
		if !flagLine.MatchString(line) {
			continue
		}
		names, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		for _, piece := range strings.Split(names, ", ") {
			word, _, _ := strings.Cut(piece, " ")
			if strings.HasPrefix(word, "-") && len(word) > 1 && !slices.Contains(flags, word) {
				flags = append(flags, word)
			}
		}
	}
	// A flag is refused with all its names: -shared is also -s and --shared.
	for _, spec := range execFlagSpecs {
		if slices.ContainsFunc(spec.names, func(n string) bool { return slices.Contains(refused, "-"+n) }) {
			flags = slices.DeleteFunc(flags, func(f string) bool { return slices.Contains(spec.names, strings.TrimLeft(f, "-")) })
		}
	}
	return flags
}

// valueFlags are flags whose value is a file: completed with file names.
var fileFlags = []string{"-config", "-socket"}

// describe is a command's summary without its synopsis, on one line.
func describe(c command) string {
	lines := strings.Split(c.summary, "\n")
	first := strings.TrimPrefix(lines[0], c.name)
	if i := strings.Index(first, "   "); i >= 0 {
		return strings.TrimSpace(first[i:])
	}
	if len(lines) > 1 {
		return strings.TrimSpace(lines[1])
	}
	return c.name
}

func completionCmd(args []string, stdout, stderr io.Writer) int {
	const usage = "lock-agent completion bash|zsh|fish\n\n" +
		"bash: source <(lock-agent completion bash), or save it as\n" +
		"      /usr/share/bash-completion/completions/lock-agent\n" +
		"zsh:  save it as _lock-agent in a directory of $fpath\n" +
		"fish: lock-agent completion fish > ~/.config/fish/completions/lock-agent.fish"
	fs := newFlags("completion", stderr)
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, fs, usage, "want one shell: bash, zsh or fish")
	}
	switch fs.Arg(0) {
	case "bash":
		fmt.Fprint(stdout, bashCompletion())
	case "zsh":
		fmt.Fprint(stdout, zshCompletion())
	case "fish":
		fmt.Fprint(stdout, fishCompletion())
	default:
		return usageError(stderr, fs, usage, fmt.Sprintf("unknown shell %q: want bash, zsh or fish", fs.Arg(0)))
	}
	return exitOK
}

func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

func bashCompletion() string {
	var b strings.Builder
	b.WriteString(`# bash completion for lock-agent (lock-agent completion bash)
_lock_agent() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opts=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "` + strings.Join(commandNames(), " ") + `" -- "$cur"))
    return
  fi
  case $prev in
    ` + strings.Join(fileFlags, "|") + `) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  case ${COMP_WORDS[1]} in
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "    %s) opts=%q ;;\n", c.name, strings.Join(flagsOf(c), " "))
	}
	b.WriteString(`  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [ "${COMP_WORDS[1]}" = completion ]; then
    COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _lock_agent lock-agent
`)
	return b.String()
}

func zshCompletion() string {
	var b strings.Builder
	b.WriteString(`#compdef lock-agent
# zsh completion for lock-agent (lock-agent completion zsh)
_lock_agent() {
  local -a commands opts
  commands=(
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "    %s\n", shellQuote(c.name+":"+describe(c)))
	}
	b.WriteString(`  )
  if (( CURRENT == 2 )); then
    _describe command commands
    return
  fi
  case $words[2] in
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "    %s) opts=(%s) ;;\n", c.name, strings.Join(flagsOf(c), " "))
	}
	b.WriteString(`  esac
  case $words[CURRENT-1] in
    ` + strings.Join(fileFlags, "|") + `) _files; return ;;
  esac
  if [[ $PREFIX == -* ]]; then
    compadd -- $opts
  elif [[ $words[2] == completion ]]; then
    compadd bash zsh fish
  else
    _files
  fi
}
if [ "$funcstack[1]" = "_lock_agent" ]; then
  _lock_agent "$@"
else
  compdef _lock_agent lock-agent
fi
`)
	return b.String()
}

func fishCompletion() string {
	var b strings.Builder
	b.WriteString("# fish completion for lock-agent (lock-agent completion fish)\n")
	fmt.Fprintf(&b, "complete -c lock-agent -n __fish_use_subcommand -f\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "complete -c lock-agent -n __fish_use_subcommand -f -a %s -d %s\n", c.name, shellQuote(describe(c)))
	}
	for _, c := range commands {
		for _, f := range flagsOf(c) {
			opt := "-o " + strings.TrimPrefix(f, "-") // Go's one-dash long flags: fish's -o
			switch {
			case strings.HasPrefix(f, "--"):
				opt = "-l " + strings.TrimPrefix(f, "--")
			case len(f) == 2:
				opt = "-s " + f[1:]
			}
			fmt.Fprintf(&b, "complete -c lock-agent -n '__fish_seen_subcommand_from %s' %s\n", c.name, opt)
		}
	}
	b.WriteString("complete -c lock-agent -n '__fish_seen_subcommand_from completion' -f -a 'bash zsh fish'\n")
	return b.String()
}

// shellQuote quotes s for sh, zsh and fish: in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func manCmd(args []string, stdout, stderr io.Writer) int {
	const usage = "lock-agent man\n\nprints the manual page in roff: lock-agent man | man -l -"
	fs := newFlags("man", stderr)
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs, usage, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	fmt.Fprint(stdout, manPage())
	return exitOK
}

// manPage is lock-agent(1): the top-level usage and every command's -h.
func manPage() string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH LOCK-AGENT 1 \"\" \"lock-agent %s\" \"User Commands\"\n", roffEscape(buildinfo.Get().Version))
	b.WriteString(`.SH NAME
lock-agent \- distributed locks for local processes, served by a per-host agent over Redis masters
.SH SYNOPSIS
.B lock-agent
.I COMMAND
.RI [ flags ]
.SH DESCRIPTION
lock-agent is a per-host daemon: local processes talk to it over a Unix
socket with a small text protocol; it takes locks across several
independent Redis masters (RedLock), renews their leases, and releases a
client's locks the moment its connection closes. The same binary is its
command line: exec runs a command under a lock, as flock(1) does for one
host; elect runs one only while elected leader; status, who and leader
show the agent and its locks.
.PP
The sections below are the text of
.B lock-agent -h
and of each
.BR "lock-agent COMMAND -h" .
.SH USAGE
`)
	b.WriteString(roffVerbatim(usageText()))
	b.WriteString(".SH COMMANDS\n")
	for _, c := range commands {
		fmt.Fprintf(&b, ".SS %s\n", roffEscape(c.name))
		b.WriteString(roffVerbatim(helpOf(c)))
	}
	b.WriteString(`.SH EXIT STATUS
0 ok; 1 a runtime failure (no agent, no quorum, a master refused); 2 an
invalid config file; 64 bad usage (EX_USAGE of sysexits.h). exec and elect
exit with CMD's status, 1 (or \-E) if the lock was busy, 124 if it was
lost; status exits 3 when the agent answers without a quorum.
.SH ENVIRONMENT
.TP
.B LOCK_AGENT_SOCKET
the agent's socket, for every client and command; without it,
/run/lock-agent/agent.sock if it exists, else the socket of
.B lock-agent run \-dev
($XDG_RUNTIME_DIR/lock-agent/agent.sock).
.SH FILES
.TP
.I /etc/lock-agent/agent.hcl
the agent's configuration (check it with
.BR "lock-agent validate \-config" ).
.TP
.I /run/lock-agent/agent.sock
the system agent's socket; members of the group lockers may connect (the package makes the group).
.SH SEE ALSO
.BR flock (1),
.BR systemd.socket (5);
docs/protocol.md, docs/operations.md and docs/safety.md in
https://github.com/lock-agent/lock-agent
`)
	return b.String()
}

// roffVerbatim is text as a no-fill block, every line as written.
func roffVerbatim(text string) string {
	var b strings.Builder
	b.WriteString(".nf\n")
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		line = roffEscape(line)
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		b.WriteString(line + "\n")
	}
	b.WriteString(".fi\n")
	return b.String()
}

// roffEscape keeps backslashes and hyphen-minus as written: a "-" in roff
// may print as a hyphen, which a shell does not take for a flag's dash.
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}
