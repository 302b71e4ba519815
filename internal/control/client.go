package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// SocketEnv is the environment variable that overrides DefaultSocket.
const SocketEnv = "SHAPERD_SOCKET"

// DefaultClientTimeout bounds one call of a Client (a reload may take a while).
const DefaultClientTimeout = 60 * time.Second

// maxResponseBytes bounds a response body (a status of many thousand users).
const maxResponseBytes = 64 << 20

// SocketPath picks the control socket: flag when not empty, else the
// SHAPERD_SOCKET environment variable (via getenv, which may be nil), else
// DefaultSocket.
func SocketPath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if getenv != nil {
		if v := getenv(SocketEnv); v != "" {
			return v
		}
	}
	return DefaultSocket
}

// Client calls a shaperd over its control socket. It implements Service.
// Errors from the server are *APIError; a socket nobody listens on gives an
// error saying so. A Client is safe for concurrent use.
type Client struct {
	path string
	http *http.Client
}

var _ Service = (*Client)(nil)

// NewClient returns a client of the daemon listening on socketPath.
func NewClient(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:    1,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{path: socketPath, http: &http.Client{Transport: tr, Timeout: DefaultClientTimeout}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// SetRate overrides a target's rates. The request is validated locally
// first, so an invalid one returns a *BadRequestError without a round trip.
func (c *Client) SetRate(ctx context.Context, req SetRateRequest) (*SetRateResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var resp SetRateResponse
	if err := c.do(ctx, http.MethodPost, "/v1/rate", req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Clear removes a target's overrides (in req.Direction, "" for all).
func (c *Client) Clear(ctx context.Context, req ClearRequest) (*ClearResponse, error) {
	var resp ClearResponse
	if err := c.do(ctx, http.MethodPost, "/v1/clear", req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Reload asks the daemon to reload its configuration and returns the
// result it applied; a refused one is an *APIError wrapping a
// *ValidationError with the problems. An older daemon answers {}: the
// result is then empty. req.AllowRemovals confirms a reload that removes
// many users.
func (c *Client) Reload(ctx context.Context, req ReloadRequest) (*ReloadStatus, error) {
	var resp ReloadStatus
	if err := c.do(ctx, http.MethodPost, "/v1/reload", req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Top returns the daemon's status with traffic counters read for this
// request. A daemon without /v1/top (older) answers 404: Top then returns
// Status's answer.
func (c *Client) Top(ctx context.Context) (*Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, "/v1/top", nil, &st)
	var ae *APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
		return c.Status(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// Overrides lists the overrides in force.
func (c *Client) Overrides(ctx context.Context) (*OverridesResponse, error) {
	var resp OverridesResponse
	if err := c.do(ctx, http.MethodGet, "/v1/overrides", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// ResetQuota sets a user's quota usage of the current period to zero.
func (c *Client) ResetQuota(ctx context.Context, req QuotaResetRequest) (*QuotaResetResponse, error) {
	var resp QuotaResetResponse
	if err := c.do(ctx, http.MethodPost, "/v1/quota/reset", req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// do sends one request and decodes the answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://shaperd"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.connError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("read answer of shaperd at %s: %w", c.path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of shaperd at %s (are shaperctl and shaperd the same version?): %w", c.path, err)
	}
	return nil
}

// connError explains a failed connection in terms of what to do. The
// message leaves out the HTTP wrapping; the error still wraps the cause.
func (c *Client) connError(err error) error {
	cause := err
	var op *net.OpError
	if errors.As(err, &op) {
		cause = op.Err
	}
	var msg string
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		msg = fmt.Sprintf("cannot reach shaperd at %s: is the daemon running? (systemctl status shaperd) [%v]", c.path, cause)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		msg = fmt.Sprintf("permission denied on %s: run as root or as a member of the socket's group (daemon.socket_group or daemon.admin_group in shaperd.toml)", c.path)
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("shaperd at %s did not answer in time", c.path)
	case errors.Is(err, context.Canceled):
		msg = "interrupted"
	default:
		msg = fmt.Sprintf("talk to shaperd at %s: %v", c.path, cause)
	}
	return &wrapped{msg: msg, err: err}
}

// wrapped is an error with its own message that still wraps err.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// decodeError turns an error answer into an *APIError.
func decodeError(status int, data []byte) error {
	var er ErrorResponse
	if err := json.Unmarshal(data, &er); err != nil || er.Error == "" {
		msg := string(bytes.TrimSpace(data))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return &APIError{StatusCode: status, Message: fmt.Sprintf("shaperd answered %d %s: %s", status, http.StatusText(status), msg)}
	}
	e := &APIError{StatusCode: status, Message: er.Error}
	switch {
	case status == http.StatusNotFound && er.Target != "":
		e.Err = &NotFoundError{Target: er.Target}
	case status == http.StatusUnprocessableEntity:
		e.Err = &ValidationError{Problems: er.Problems}
	case status == http.StatusForbidden:
		e.Err = &ForbiddenError{Message: er.Error}
	case status == http.StatusBadRequest:
		e.Err = &BadRequestError{Message: er.Error, Usage: er.Usage}
	case status == http.StatusServiceUnavailable:
		e.Err = ErrUnavailable
	}
	return e
}
