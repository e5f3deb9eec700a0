package telemetry_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/agent/telemetry"
	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/quorum"
)

// TestBuildInfoMetric: lock_agent_build_info is 1 with the binary's version,
// commit and Go version as labels, as node_exporter's node_exporter_build_info,
// so a dashboard can tell which build each host runs.
func TestBuildInfoMetric(t *testing.T) {
	m := telemetry.NewMetrics(buildinfo.Info{Version: "0.2.0", Commit: "f00d", GoVersion: "go1.26.8"}, []quorum.MasterConfig{{Name: "a"}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	want := `lock_agent_build_info{commit="f00d",goversion="go1.26.8",version="0.2.0"} 1`
	if !strings.Contains(string(body), want+"\n") {
		t.Fatalf("no %s in:\n%s", want, body)
	}
}
