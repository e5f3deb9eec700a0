package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/quorum"
)

// exitNoQuorum is status's exit code when the agent answers but fewer than
// a quorum of its masters are up: every new LOCK would get NO_QUORUM.
const exitNoQuorum = 3

// agentStatus is the STATUS reply. The Go client's Status has no agent id,
// so status speaks the one request itself.
type agentStatus struct {
	ID       string `json:"id"`
	Version  string `json:"agent"`
	Sessions int    `json:"sessions"`
	Holds    int    `json:"holds"`
	Waiters  int    `json:"waiters"`
	Quorum   int    `json:"quorum"`
	// Tolerates is how many masters may be down or quarantined while the
	// agent still grants: 0 for one master.
	Tolerates int      `json:"tolerates"`
	Up        int      `json:"up"`
	Masters   []master `json:"masters"`
	// Settings are the agent's cluster settings; SettingsDiffer, while a
	// majority of masters records others, names those that differ.
	Settings       string   `json:"settings,omitempty"`
	SettingsDiffer []string `json:"settings_differ,omitempty"`
}

func statusCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("status", stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	const usage = "lock-agent status [-socket PATH] [-json]\n\nexit status: 0 a quorum of masters is up; 3 the agent answers without a quorum\n(or its settings differ from the cluster's); 1 the agent cannot be reached; 64 bad usage"
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs, usage, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := queryStatus(ctx, *socket)
	if err != nil {
		printError(stderr, "status", err)
		return exitFailure
	}
	code := exitOK
	health := "ok"
	switch {
	case len(s.SettingsDiffer) > 0:
		code, health = exitNoQuorum, "SETTINGS DIFFER"
	case s.Up < s.Quorum:
		code, health = exitNoQuorum, "NO QUORUM"
	}
	if *asJSON {
		if c := printJSON(stdout, stderr, s); c != exitOK {
			return c
		}
		return code
	}
	fmt.Fprintf(stdout, "agent %s (lock-agent %s): %d/%d masters up (quorum %d, %s, %s); %d sessions, %d holds, %d waiters\n\n",
		s.ID, s.Version, s.Up, len(s.Masters), s.Quorum, tolerance(s.Tolerates), health, s.Sessions, s.Holds, s.Waiters)
	if s.Tolerates == 0 {
		fmt.Fprintf(stdout, "no master may fail: with one down nothing is granted and every hold is lost; one restarted empty\n"+
			"stops every grant for its quarantine (docs/operations.md, \"How many masters\").\n\n")
	}
	if len(s.SettingsDiffer) > 0 {
		fmt.Fprintf(stdout, "this agent grants nothing: its settings differ from the cluster's: %s.\n"+
			"Run it with the cluster's settings, or change the cluster's (lock-agent settings; see docs/operations.md).\n\n", s.settingsDiffer())
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MASTER\tADDRESS\tSTATE\tWHY")
	for _, m := range s.Masters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, m.Address, m.State, s.why(m.Master))
		printShards(tw, m)
	}
	tw.Flush()
	return code
}

// why says why master m does not vote, in words.
func (s *agentStatus) why(m lockagent.Master) string {
	switch {
	case m.State == "quarantined" && m.Reason == "no_marker_yet":
		return "no marker yet: waits for an agent whose settings a majority records; " + quorum.Data(m.Data).Advice()
	case m.State == "quarantined":
		return fmt.Sprintf("votes again in %v; %s", time.Duration(m.QuarantineLeftMS)*time.Millisecond, quorum.Data(m.Data).Advice())
	case m.State == "settings":
		return "records other settings: " + quorum.DescribeDiff(quorum.ParseSettings(s.Settings), quorum.ParseSettings(m.Settings), "it records")
	}
	return m.Reason
}

// settingsDiffer says how the agent's settings differ from those most
// masters that refuse it record, and on how many masters: ERR SETTINGS's
// text, from STATUS's lines.
func (s *agentStatus) settingsDiffer() string {
	var recorded []quorum.Settings
	for _, m := range s.Masters {
		if m.State == "settings" {
			recorded = append(recorded, quorum.ParseSettings(m.Settings))
		}
	}
	return quorum.DescribeRefusals(quorum.ParseSettings(s.Settings), recorded, len(s.Masters))
}

// queryStatus sends one STATUS and reads its DATA lines and final reply.
func queryStatus(ctx context.Context, path string) (*agentStatus, error) {
	conn, err := dialSocket(ctx, path)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "1 STATUS\n"); err != nil {
		return nil, err
	}
	s := &agentStatus{}
	r := bufio.NewScanner(conn)
	for r.Scan() {
		words := strings.Fields(r.Text())
		if len(words) >= 2 && words[0] == "-" && words[1] == "ERR" { // refused: LIMIT, SHUTTING_DOWN
			return nil, fmt.Errorf("%s", strings.Join(words[2:], " "))
		}
		if len(words) < 2 || words[0] != "1" {
			continue // a push
		}
		f := fields(words[2:])
		switch words[1] {
		case "DATA":
			s.addMaster(f, shardsOf(words[2:]))
		case "OK":
			s.readFinal(f)
			return s, nil
		default:
			return nil, fmt.Errorf("%s", strings.Join(words[1:], " "))
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("the agent closed the connection")
}

// addMaster reads one STATUS DATA line's fields f: a master, and shards,
// its shards if it is a Redis Cluster.
func (s *agentStatus) addMaster(f map[string]string, shards []shard) {
	left, _ := strconv.ParseInt(f["quarantine_left"], 10, 64)
	m := lockagent.Master{Name: f["master"], Address: f["address"], State: f["state"], Reason: f["reason"], QuarantineLeftMS: left,
		Data: f["data"], Settings: f["settings"]}
	s.Masters = append(s.Masters, master{m, shards})
	if m.State == "up" {
		s.Up++
	}
}

// readFinal reads the fields f of STATUS's final OK line.
func (s *agentStatus) readFinal(f map[string]string) {
	s.ID, s.Version = f["id"], f["agent"]
	s.Sessions, _ = strconv.Atoi(f["sessions"])
	s.Holds, _ = strconv.Atoi(f["holds"])
	s.Waiters, _ = strconv.Atoi(f["waiters"])
	s.Quorum, _ = strconv.Atoi(f["quorum"])
	s.Tolerates = len(s.Masters) - s.Quorum // an agent older than tolerates=
	if t, err := strconv.Atoi(f["tolerates"]); err == nil {
		s.Tolerates = t
	}
	s.Settings = f["settings"]
	if d := f["settings_differ"]; d != "" {
		s.SettingsDiffer = strings.Split(d, ",")
	}
}

func fields(words []string) map[string]string {
	f := map[string]string{}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			f[k] = v
		}
	}
	return f
}
