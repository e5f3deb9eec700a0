package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// exec reads its flags the way flock(1) (getopt_long) does, so that a
// crontab line keeps its flags when `flock FILE` becomes `lock-agent exec
// NAME`, and the way Go's flag package does, as exec always has:
//
//	-n -x -w 5          short flags, each on its own
//	-nxw5, -nxw 5       short flags bundled; one taking a value ends the bundle
//	--timeout 5         long flags, with two dashes ...
//	--timeout=5         ... and the value after "="
//	--time 5            a long flag's unambiguous prefix, as getopt_long takes
//	-wait 5, -wait=5    a long flag with one dash, as Go's flag package takes
//	-w=5, -s=false      a short flag with "=", as Go's flag package takes
//	--                  the end of the flags
//
// A word of one dash is a long flag when it names one exactly, and otherwise
// a bundle of short flags: -socket is exec's -socket, as it always was,
// never -s -o -c ket; a one-dash prefix (-sock) is a bundle.

// execFlagSpecs are exec's flags and every name each goes by: flock's,
// short and long, and exec's own. execUsage is their help; the first name
// of each keys execFlagSetters.
var execFlagSpecs = []flagSpec{
	{names: []string{"socket"}, value: true},
	{names: []string{"wait", "w", "timeout"}, value: true},
	{names: []string{"n", "nb", "nonblock"}},
	{names: []string{"ttl"}, value: true},
	{names: []string{"shared", "s"}},
	{names: []string{"exclusive", "x", "e"}},
	{names: []string{"limit"}, value: true},
	{names: []string{"fair"}},
	{names: []string{"value"}, value: true},
	{names: []string{"on-wanted"}, value: true},
	{names: []string{"delay"}, value: true},
	{names: []string{"min-hold"}, value: true},
	{names: []string{"conflict-exit", "E", "conflict-exit-code"}, value: true},
	{names: []string{"kill-after"}, value: true},
	{names: []string{"quiet", "q"}},
	{names: []string{"c", "command"}, value: true},
	{names: []string{"close", "o"}},
	{names: []string{"no-fork", "F"}},
	{names: []string{"help", "h"}},
}

// execFlagSetters set each flag's value (a switch's is "true" or "false")
// into the options.
var execFlagSetters = map[string]func(o *execOptions, v string) error{
	"socket":        func(o *execOptions, v string) error { o.socket = v; return nil },
	"wait":          func(o *execOptions, v string) error { return o.wait.Set(v) },
	"n":             func(o *execOptions, v string) error { return setBool(&o.nonblock, v) },
	"ttl":           func(o *execOptions, v string) error { return setDuration(&o.ttl, v) },
	"shared":        func(o *execOptions, v string) error { return setBool(&o.shared, v) },
	"exclusive":     func(o *execOptions, v string) (err error) { o.shared, err = parseNot(v); return err },
	"limit":         func(o *execOptions, v string) (err error) { o.limit, err = strconv.Atoi(v); return err },
	"fair":          func(o *execOptions, v string) error { return setBool(&o.fair, v) },
	"value":         func(o *execOptions, v string) error { o.value = v; return nil },
	"on-wanted":     func(o *execOptions, v string) (err error) { o.onWanted, err = parseSignal(v); return err },
	"delay":         func(o *execOptions, v string) error { return o.delay.Set(v) },
	"min-hold":      func(o *execOptions, v string) error { return setDuration(&o.minHold, v) },
	"conflict-exit": func(o *execOptions, v string) (err error) { o.conflictExit, err = strconv.Atoi(v); return err },
	"kill-after":    func(o *execOptions, v string) error { return setDuration(&o.killAfter, v) },
	"quiet":         func(o *execOptions, v string) error { return setBool(&o.quiet, v) },
	"c":             func(o *execOptions, v string) error { o.shell = v; return nil },
	"close":         func(o *execOptions, v string) error { return setBool(&o.close, v) },
	"no-fork":       func(o *execOptions, v string) error { return setBool(&o.noFork, v) },
	"help":          func(*execOptions, string) error { return errHelp },
}

func setBool(b *bool, v string) (err error) {
	*b, err = strconv.ParseBool(v)
	return err
}

// parseNot is a switch that turns another off: -x is not -s.
func parseNot(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	return !b, err
}

func setDuration(d *time.Duration, v string) (err error) {
	*d, err = time.ParseDuration(v)
	return err
}

// flagSpec is one flag and every name it goes by: names of one letter are
// short, longer ones long.
type flagSpec struct {
	names []string
	value bool // takes a value; otherwise it is a switch (-x, or -x=false)
}

// givenFlag is one flag of a command line: the spec it matched, the name it
// was given by (for messages) and its value ("true" for a switch given
// without one).
type givenFlag struct {
	spec  *flagSpec
	name  string
	value string
}

// scanFlags reads the flags at the head of args, up to "--" (which it
// consumes), a lone "-", or the first word that is not a flag, and returns
// them in order with the words after them.
func scanFlags(specs []flagSpec, args []string) ([]givenFlag, []string, error) {
	var given []givenFlag
	for len(args) > 0 {
		word := args[0]
		switch {
		case word == "--":
			return given, args[1:], nil
		case word == "-" || !strings.HasPrefix(word, "-"):
			return given, args, nil
		}
		var found []givenFlag
		var err error
		if strings.HasPrefix(word, "--") {
			found, args, err = scanLong(specs, "--", word[2:], args[1:])
		} else if goStyle(specs, word[1:]) {
			found, args, err = scanLong(specs, "-", word[1:], args[1:])
		} else {
			found, args, err = scanShort(specs, word[1:], args[1:])
		}
		if err != nil {
			return nil, nil, err
		}
		given = append(given, found...)
	}
	return given, nil, nil
}

// goStyle says whether a one-dash word (without its dash) is a flag as Go's
// flag package reads it: a long name exactly (-wait, -socket=p), or one
// letter with "=" and a value (-w=5, -s=false, -E=3), which exec took
// before it took flock's spellings. getopt would read -w=5 as -w "=5", a
// value no flag of exec takes (and -c=CMD as the command "=CMD", which no
// crontab means).
func goStyle(specs []flagSpec, word string) bool {
	name, _, hasValue := strings.Cut(word, "=")
	return (len(name) > 1 || len(name) == 1 && hasValue) && lookupExact(specs, name) != nil
}

// scanLong reads one long flag, word being it without its dashes (which
// messages quote as given); a value is after "=" or the next word. Two
// dashes allow a unique prefix of its name, as getopt_long does.
func scanLong(specs []flagSpec, dashes, word string, rest []string) ([]givenFlag, []string, error) {
	prefixes := dashes == "--"
	name, value, hasValue := strings.Cut(word, "=")
	var spec *flagSpec
	if len(name) > 1 || !prefixes { // --x is no short flag: getopt_long reads it as a prefix
		spec = lookupExact(specs, name)
	}
	if spec == nil && prefixes && name != "" {
		var err error
		if spec, err = lookupPrefix(specs, name); err != nil {
			return nil, nil, err
		}
	}
	if spec == nil {
		return nil, nil, fmt.Errorf("unknown flag %s%s", dashes, name)
	}
	switch {
	case !spec.value && hasValue:
		if _, err := strconv.ParseBool(value); err != nil {
			return nil, nil, fmt.Errorf("%s%s: want true or false, got %q", dashes, name, value)
		}
	case !spec.value:
		value = "true"
	case !hasValue && len(rest) == 0:
		return nil, nil, fmt.Errorf("%s%s needs a value", dashes, name)
	case !hasValue:
		value, rest = rest[0], rest[1:]
	}
	return []givenFlag{{spec, name, value}}, rest, nil
}

// scanShort reads a bundle of short flags, letters being it without its
// dash. A flag that takes a value takes the rest of the bundle, or else the
// next word.
func scanShort(specs []flagSpec, letters string, rest []string) ([]givenFlag, []string, error) {
	var given []givenFlag
	for i := 0; i < len(letters); i++ {
		name := letters[i : i+1]
		spec := lookupExact(specs, name)
		if spec == nil {
			return nil, nil, fmt.Errorf("unknown flag -%s", name)
		}
		if !spec.value {
			given = append(given, givenFlag{spec, name, "true"})
			continue
		}
		value := letters[i+1:]
		if value == "" {
			if len(rest) == 0 {
				return nil, nil, fmt.Errorf("-%s needs a value", name)
			}
			value, rest = rest[0], rest[1:]
		}
		return append(given, givenFlag{spec, name, value}), rest, nil
	}
	return given, rest, nil
}

// lookupExact finds the flag named name: among short names if it is one
// letter, else among long names.
func lookupExact(specs []flagSpec, name string) *flagSpec {
	for i := range specs {
		for _, n := range specs[i].names {
			if n == name {
				return &specs[i]
			}
		}
	}
	return nil
}

// lookupPrefix finds the one flag that the long names starting with prefix
// belong to: nil if none does, an error if several do (several names of
// one flag are not ambiguous).
func lookupPrefix(specs []flagSpec, prefix string) (*flagSpec, error) {
	var found *flagSpec
	var matches []string
	ambiguous := false
	for i := range specs {
		for _, n := range specs[i].names {
			if len(n) > 1 && strings.HasPrefix(n, prefix) {
				matches = append(matches, "--"+n)
				ambiguous = ambiguous || (found != nil && found != &specs[i])
				found = &specs[i]
			}
		}
	}
	if ambiguous {
		return nil, fmt.Errorf("flag --%s is ambiguous: %s", prefix, strings.Join(matches, ", "))
	}
	return found, nil
}
