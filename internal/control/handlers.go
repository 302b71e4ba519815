package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

func (s *Server) handleStatus(ctx context.Context, _ *http.Request) (any, error) {
	st, err := s.svc.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if st == nil {
		return nil, errors.New("status: the daemon returned no status")
	}
	return st, nil
}

func (s *Server) handleSetRate(ctx context.Context, r *http.Request) (any, error) {
	req, err := decodeSetRate(r.Body)
	if err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	req.normalize()
	resp, err := s.svc.SetRate(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("set-rate %s: %w", req.Target, err)
	}
	if resp == nil {
		return nil, fmt.Errorf("set-rate %s: the daemon returned no answer", req.Target)
	}
	return resp, nil
}

func (s *Server) handleClear(ctx context.Context, r *http.Request) (any, error) {
	var req ClearRequest
	if _, err := decodeBody(r.Body, &req); err != nil {
		return nil, err
	}
	if _, _, err := ParseDirectedTarget(req.Target, req.Direction); err != nil {
		return nil, err
	}
	resp, err := s.svc.Clear(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("clear %s: %w", req.Target, err)
	}
	if resp == nil {
		return nil, fmt.Errorf("clear %s: the daemon returned no answer", req.Target)
	}
	return resp, nil
}

func (s *Server) handleTop(ctx context.Context, _ *http.Request) (any, error) {
	st, err := s.svc.Top(ctx)
	if err != nil {
		return nil, fmt.Errorf("top: %w", err)
	}
	if st == nil {
		return nil, errors.New("top: the daemon returned no status")
	}
	return st, nil
}

func (s *Server) handleOverrides(ctx context.Context, _ *http.Request) (any, error) {
	resp, err := s.svc.Overrides(ctx)
	if err != nil {
		return nil, fmt.Errorf("overrides: %w", err)
	}
	if resp == nil {
		return nil, errors.New("overrides: the daemon returned no answer")
	}
	return resp, nil
}

func (s *Server) handleQuotaReset(ctx context.Context, r *http.Request) (any, error) {
	var req QuotaResetRequest
	if _, err := decodeBody(r.Body, &req); err != nil {
		return nil, err
	}
	if t, err := ParseTarget(req.User); err != nil {
		return nil, err
	} else if t.Kind != TargetUser {
		return nil, BadRequest("quota reset: %q is not a user name", req.User)
	}
	resp, err := s.svc.ResetQuota(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("quota reset %s: %w", req.User, err)
	}
	if resp == nil {
		return nil, fmt.Errorf("quota reset %s: the daemon returned no answer", req.User)
	}
	return resp, nil
}

func (s *Server) handleReload(ctx context.Context, r *http.Request) (any, error) {
	// The body is optional: nothing, or a ReloadRequest.
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyError(err)
	}
	var req ReloadRequest
	if len(bytes.TrimSpace(b)) > 0 {
		if _, err := decodeBody(bytes.NewReader(b), &req); err != nil {
			return nil, err
		}
	}
	resp, err := s.svc.Reload(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reload: %w", err)
	}
	if resp == nil {
		return struct{}{}, nil
	}
	return resp, nil
}

// writeJSON writes v with status. Encoding errors of our own types cannot
// happen; a failed write means the client went away.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorResponse{Error: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
