package telemetry_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent/telemetry"
)

// TestMetricsServer: the listener serves GET /metrics and nothing else, and
// stops with its context.
func TestMetricsServer(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("lock_agent_test 1\n")) })
	srv, err := telemetry.ListenMetrics("127.0.0.1:0", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	base := "http://" + srv.Addr().String()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/metrics", 200},
		{"HEAD", "/metrics", 200},
		{"POST", "/metrics", 405},
		{"GET", "/", 404},
		{"GET", "/debug/pprof/", 404},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	if _, err := client.Get(base + "/metrics"); err == nil {
		t.Error("still serving after Run returned")
	}
	if err := srv.Run(ctx); err != nil {
		t.Errorf("a second Run: %v", err)
	}
}
