package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TelemetryConfig is where the agent serves its metrics.
type TelemetryConfig struct {
	// PrometheusListen is the host:port of the listener that serves GET
	// /metrics. "" (the default) serves none: metrics are opt-in, and they
	// are never served on the client socket.
	PrometheusListen string
}

type telemetryBlock struct {
	PrometheusListen *string `hcl:"prometheus_listen,optional"`
}

func (v *validator) telemetry(b *telemetryBlock, c *Config) {
	if b == nil || b.PrometheusListen == nil {
		return
	}
	c.Telemetry.PrometheusListen = *b.PrometheusListen
	_, port, err := net.SplitHostPort(*b.PrometheusListen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		v.errorf("telemetry", "", "prometheus_listen", "want host:port such as \"127.0.0.1:9464\", got %q", *b.PrometheusListen)
	}
}

// metricsShutdownGrace bounds how long a stopping MetricsServer waits for
// scrapes in flight.
const metricsShutdownGrace = time.Second

// MetricsServer serves one handler at GET /metrics on its own TCP listener.
type MetricsServer struct {
	ln  net.Listener
	srv *http.Server
	log hclog.Logger
}

// ListenMetrics binds addr at once, so that a taken port is an error at
// start rather than in the background. Port 0 picks a free port: see Addr.
// Run serves it.
func ListenMetrics(addr string, h http.Handler, log hclog.Logger) (*MetricsServer, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h) // HEAD too; any other method is 405, any other path 404
	return &MetricsServer{ln: ln, log: log, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}}, nil
}

// Addr is the address the server is bound to.
func (s *MetricsServer) Addr() net.Addr { return s.ln.Addr() }

// Run serves until ctx ends, then closes the listener and waits (at most
// a second) for the scrapes in flight. It returns an error only if serving
// failed. Calling it again after it returned returns nil at once.
func (s *MetricsServer) Run(ctx context.Context) error {
	s.log.Info("serving metrics", "address", "http://"+s.ln.Addr().String()+"/metrics")
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	select {
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), metricsShutdownGrace)
	defer cancel()
	if err := s.srv.Shutdown(stopCtx); err != nil {
		s.srv.Close() // scrapes still in flight are cut off
	}
	<-served
	return nil
}
