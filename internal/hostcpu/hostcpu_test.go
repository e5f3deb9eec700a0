package hostcpu

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"a kernel of 5.13 or later has a some and a full line", "some avg10=98.58 avg60=73.60 avg300=63.15 total=40261494946\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 40261494946 * time.Microsecond, true},
		{"an earlier one has the some line alone", "some avg10=0.00 avg60=0.00 avg300=0.00 total=12\n", 12 * time.Microsecond, true},
		{"the some line is found after another", "full avg10=0.00 avg60=0.00 avg300=0.00 total=7\nsome avg10=1.00 avg60=0.00 avg300=0.00 total=9\n", 9 * time.Microsecond, true},
		{"without a some line it is unknown", "full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", 0, false},
		{"without a total it is unknown", "some avg10=0.00 avg60=0.00 avg300=0.00\n", 0, false},
		{"a negative total is unknown", "some avg10=0.00 total=-3\n", 0, false},
		{"a total past time.Duration is unknown", "some total=9223372036854776\n", 0, false},
		{"an empty file is unknown", "", 0, false},
	} {
		got, ok := parse([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: parse = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
