package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

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
