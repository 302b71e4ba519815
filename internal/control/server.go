package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Limits of the server. Requests are tiny; these keep a misbehaving client
// from holding memory or goroutines.
const (
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes = 64 << 10
	// maxHeaderBytes bounds the request line and headers.
	maxHeaderBytes = 16 << 10
	// DefaultRequestTimeout bounds one call of the Service.
	DefaultRequestTimeout = 30 * time.Second
	readHeaderTimeout     = 5 * time.Second
	readTimeout           = 10 * time.Second
	idleTimeout           = 60 * time.Second
	writeSlack            = 5 * time.Second
)

// Server serves a Service over HTTP on a unix socket listener.
type Server struct {
	svc    Service
	log    *slog.Logger
	http   *http.Server
	routes map[string]route
	// Access decides who may read and who may change (see Access); nil
	// admits root only. Set it before Serve.
	Access *Access
	// RequestTimeout bounds each Service call (default
	// DefaultRequestTimeout). Set it before Serve.
	RequestTimeout time.Duration
}

// NewServer returns a server for svc. logger may be nil (no logs).
func NewServer(svc Service, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{svc: svc, log: logger, RequestTimeout: DefaultRequestTimeout}
	// Exact paths, no ServeMux: it would answer unclean paths with
	// redirects that are not JSON.
	s.routes = map[string]route{
		"/v1/status":         {"status", RoleRead, s.endpoint(http.MethodGet, s.handleStatus)},
		"/v1/rate":           {"set-rate", RoleAdmin, s.endpoint(http.MethodPost, s.handleSetRate)},
		"/v1/clear":          {"clear", RoleAdmin, s.endpoint(http.MethodPost, s.handleClear)},
		"/v1/reload":         {"reload", RoleAdmin, s.endpoint(http.MethodPost, s.handleReload)},
		"/v1/overrides":      {"overrides", RoleRead, s.endpoint(http.MethodGet, s.handleOverrides)},
		"/v1/top":            {"top", RoleRead, s.endpoint(http.MethodGet, s.handleTop)},
		"/v1/quota/reset":    {"quota reset", RoleAdmin, s.endpoint(http.MethodPost, s.handleQuotaReset)},
		"/v1/simulate":       {"simulate", RoleRead, s.endpoint(http.MethodPost, s.handleSimulate)},
		"/v1/reload/dry-run": {"reload --dry-run", RoleRead, s.endpoint(http.MethodGet, s.handlePlanDiff)},
	}
	s.userRoutes()
	s.nodeRoutes()
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       withPeer,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return s
}

// ServeHTTP handles one request: it recovers from panics in the Service
// (answering 500) so that no request can take the daemon down.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("control request panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeJSON(w, http.StatusInternalServerError, ErrorResponse{Error: "internal error in shaperd (see its log)"})
		}
	}()
	rt, ok := s.routes[r.URL.Path]
	if !ok {
		writeJSON(w, http.StatusNotFound, ErrorResponse{
			Error: fmt.Sprintf("no endpoint %q (are shaperctl and shaperd the same version?)", r.URL.Path),
		})
		return
	}
	// The caller's role is checked before the body is read: a refused
	// caller costs nothing. The GET endpoints read; the others change.
	p, known := PeerFrom(r.Context())
	if !known || s.Access.Role(p) < rt.need {
		err := s.Access.forbidden(rt.op, rt.need, p, known)
		s.log.Warn("control request refused", "method", r.Method, "path", r.URL.Path,
			"uid", p.UID, "gid", p.GID, "pid", p.PID, "err", err)
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusForbidden, ErrorResponse{Error: err.Error()})
		return
	}
	rt.h.ServeHTTP(w, r)
}

// route is one endpoint: the shaperctl command it serves (for messages),
// the role it needs and its handler.
type route struct {
	op   string
	need Role
	h    http.Handler
}

// Serve accepts connections on l until Shutdown; it returns nil after
// Shutdown and the accept error otherwise. It closes l. Call it once.
func (s *Server) Serve(l net.Listener) error {
	// The answer must be written within the request's time plus slack.
	s.http.WriteTimeout = readTimeout + s.RequestTimeout + writeSlack
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, waits for requests in flight until ctx ends,
// then closes their connections. It closes the listener (which removes the
// socket file when it came from Listen).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	return err
}

// endpoint restricts a handler to one method and gives it a bounded context.
func (s *Server) endpoint(method string, h func(context.Context, *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeJSON(w, http.StatusMethodNotAllowed, ErrorResponse{Error: r.URL.Path + " takes " + method + ", not " + r.Method})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		ctx, cancel := context.WithTimeout(r.Context(), s.RequestTimeout)
		defer cancel()
		attrs := []any{"method", r.Method, "path", r.URL.Path}
		if p, ok := PeerFrom(r.Context()); ok {
			attrs = append(attrs, "uid", p.UID, "pid", p.PID)
		}
		resp, err := h(ctx, r)
		if err != nil {
			status, body := s.errorResponse(err)
			s.log.Log(r.Context(), levelFor(status), "control request failed",
				append(attrs, "status", status, "err", err)...)
			writeJSON(w, status, body)
			return
		}
		level := slog.LevelDebug
		if r.Method != http.MethodGet {
			level = slog.LevelInfo // changes are worth a line: who did what
		}
		s.log.Log(r.Context(), level, "control request", attrs...)
		writeJSON(w, http.StatusOK, resp)
	})
}

// levelFor logs client mistakes at Info and daemon failures at Error.
func levelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelError
	}
	return slog.LevelInfo
}

// errorResponse maps an error to its status and body (see Service).
func (s *Server) errorResponse(err error) (int, ErrorResponse) {
	var (
		nf  *NotFoundError
		br  *BadRequestError
		ve  *ValidationError
		mbe *http.MaxBytesError
		fe  *ForbiddenError
	)
	switch {
	case errors.As(err, &fe):
		return http.StatusForbidden, ErrorResponse{Error: fe.Error()}
	case errors.As(err, &nf):
		return http.StatusNotFound, ErrorResponse{Error: err.Error(), Target: nf.Target}
	case errors.As(err, &ve):
		return http.StatusUnprocessableEntity, ErrorResponse{Error: err.Error(), Problems: ve.Problems}
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, ErrorResponse{Error: err.Error()}
	case errors.As(err, &br):
		return http.StatusBadRequest, ErrorResponse{Error: err.Error(), Usage: br.Usage}
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable, ErrorResponse{Error: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, ErrorResponse{Error: "shaperd did not answer in time: " + err.Error()}
	default:
		return http.StatusInternalServerError, ErrorResponse{Error: err.Error()}
	}
}
