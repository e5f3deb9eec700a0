package lockagent

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Status is the agent's view of itself and its masters.
type Status struct {
	Agent    string   `json:"agent"`
	Sessions int      `json:"sessions"`
	Holds    int      `json:"holds"`
	Waiters  int      `json:"waiters"`
	Quorum   int      `json:"quorum"`
	Masters  []Master `json:"masters"`
	// LockDelay is the agent's lock.lock_delay: the delay= of a LOCK that
	// gives none (0 from an agent older than lock_delay=).
	LockDelay time.Duration `json:"lock_delay,omitempty"`
	// Settings are the agent's cluster settings, as the masters record
	// them ("lease=15s;drift=0.01;..."); SettingsDiffer names those that
	// differ from what a majority of masters records, while they do: the
	// agent then grants nothing (ERR SETTINGS).
	Settings       string   `json:"settings,omitempty"`
	SettingsDiffer []string `json:"settings_differ,omitempty"`
}

// Master is one Redis master as the agent sees it.
type Master struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	State   string `json:"state"` // up, down, quarantined, unsafe or settings
	// Reason says why a master is down or unsafe, as one word.
	Reason string `json:"reason,omitempty"`
	// QuarantineLeftMS is, while quarantined, how long until it votes again.
	QuarantineLeftMS int64 `json:"quarantine_left_ms,omitempty"`
	// Data is, while quarantined, what the agent can tell of why it holds
	// nothing: "new" (a new deployment: no master had a marker), "lost" (it
	// lost its data: never bootstrap it), "changed" (the settings command
	// quarantined it) or "unknown" ("" from an agent older than data=).
	Data string `json:"data,omitempty"`
	// Settings are the cluster settings its marker records ("" if none).
	Settings string `json:"settings,omitempty"`
}

// masterOf reads one STATUS DATA line.
func masterOf(d map[string]string) Master {
	left, _ := strconv.ParseInt(d["quarantine_left"], 10, 64)
	return Master{Name: d["master"], Address: d["address"], State: d["state"], Reason: d["reason"], QuarantineLeftMS: left,
		Data: d["data"], Settings: d["settings"]}
}

// Holder is one current holder of a name, on any host.
type Holder struct {
	Agent string    `json:"agent"`
	PID   int       `json:"pid"`
	UID   int       `json:"uid"`
	Owner string    `json:"owner"`
	Mode  string    `json:"mode"`
	Fence int64     `json:"fence"`
	Since time.Time `json:"since"`
	// Limit and Slot are a semaphore hold's limit=K and its slot (1 to K);
	// both 0 for a lock.
	Limit int `json:"limit,omitempty"`
	Slot  int `json:"slot,omitempty"`
	// Value is the hold's value (Value, Campaign, Proclaim), decoded.
	Value string `json:"value,omitempty"`
}

// Waiting is one agent's requests waiting for a name, as it records them
// in the masters.
type Waiting struct {
	Agent string    `json:"agent"`
	Count int       `json:"count"`
	Since time.Time `json:"since"`
}

// Occupancy is who holds a name and how many wait for it, as recorded in
// the masters.
type Occupancy struct {
	Holders []Holder `json:"holders"`
	// Queued is the number of waiters in the name's queue in the masters,
	// across agents: fair=true waiters, and writers that readers keep out.
	// -1 when the agent does not report it: it leaves out an empty queue,
	// and an agent without fair queues never reports one.
	Queued int `json:"queued"`
	// Waiting lists, per agent, the requests waiting for the name (an
	// agent that does not report them leaves it empty).
	Waiting []Waiting `json:"waiting,omitempty"`
	// DelayedUntil is, while a Delay or MinHold keeps the name from
	// everyone after a hold ended, when that ends; zero otherwise.
	DelayedUntil time.Time `json:"delayed_until,omitzero"`
}

// Hold is one lock held by this connection.
type Hold struct {
	Name     string        `json:"name"`
	Owner    string        `json:"owner"`
	Fence    int64         `json:"fence"`
	Count    int           `json:"count"`
	Mode     string        `json:"mode"`
	Validity time.Duration `json:"validity"`
	// Limit and Slot are a semaphore hold's limit=K and its slot (1 to K);
	// both 0 for a lock.
	Limit int `json:"limit,omitempty"`
	Slot  int `json:"slot,omitempty"`
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func atoi64(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// Status asks the agent for its status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	r, err := c.do(ctx, "STATUS")
	if err != nil {
		return Status{}, err
	}
	s := Status{Agent: r.fields["agent"], Sessions: atoi(r.fields["sessions"]), Holds: atoi(r.fields["holds"]),
		Waiters: atoi(r.fields["waiters"]), Quorum: atoi(r.fields["quorum"]), Settings: r.fields["settings"],
		LockDelay: time.Duration(atoi64(r.fields["lock_delay"])) * time.Millisecond}
	if d := r.fields["settings_differ"]; d != "" {
		s.SettingsDiffer = strings.Split(d, ",")
	}
	for _, d := range r.data {
		s.Masters = append(s.Masters, masterOf(d))
	}
	return s, nil
}

// Who returns the current holders of name as recorded in the masters. A name
// outside the protocol is an *ArgError, and nothing is sent.
func (c *Client) Who(ctx context.Context, name string) ([]Holder, error) {
	o, err := c.Occupancy(ctx, name)
	return o.Holders, err
}

// Occupancy returns the current holders of name, as Who does, and the
// length of its fair queue, from the same WHO request.
func (c *Client) Occupancy(ctx context.Context, name string) (Occupancy, error) {
	if err := checkName(name); err != nil {
		return Occupancy{}, err
	}
	r, err := c.do(ctx, "WHO "+name)
	if err != nil {
		return Occupancy{}, err
	}
	o := Occupancy{Holders: make([]Holder, 0, len(r.data)), Queued: -1}
	for _, d := range r.data {
		switch {
		case d[""] == "waiting":
			o.Waiting = append(o.Waiting, Waiting{Agent: d["agent"], Count: atoi(d["count"]),
				Since: time.UnixMilli(atoi64(d["since"]))})
		case d["delayed_until"] != "":
			o.DelayedUntil = time.UnixMilli(atoi64(d["delayed_until"]))
		case d[""] == "":
			o.Holders = append(o.Holders, holderOf(d))
		}
	}
	if q, ok := r.fields["queued"]; ok {
		if n, err := strconv.Atoi(q); err == nil && n >= 0 {
			o.Queued = n
		}
	}
	return o, nil
}

func holderOf(d map[string]string) Holder {
	return Holder{Agent: d["agent"], PID: atoi(d["pid"]), UID: atoi(d["uid"]), Owner: d["owner"],
		Mode: d["mode"], Fence: atoi64(d["fence"]), Since: time.UnixMilli(atoi64(d["since"])),
		Limit: atoi(d["limit"]), Slot: atoi(d["slot"]), Value: decodeValue(d["value"])}
}

// Holds returns the locks this connection holds.
func (c *Client) Holds(ctx context.Context) ([]Hold, error) {
	r, err := c.do(ctx, "HOLDS")
	if err != nil {
		return nil, err
	}
	out := make([]Hold, 0, len(r.data))
	for _, d := range r.data {
		out = append(out, Hold{Name: d["name"], Owner: d["owner"], Fence: atoi64(d["fence"]), Count: atoi(d["count"]),
			Mode: d["mode"], Validity: time.Duration(atoi64(d["validity"])) * time.Millisecond,
			Limit: atoi(d["limit"]), Slot: atoi(d["slot"])})
	}
	return out, nil
}
