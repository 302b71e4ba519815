package control

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Planning requests: what the plan would give (simulate) and what a reload
// would change (reload --dry-run). Both change nothing, so the read role
// may ask.

// SimulateRequest asks the daemon to predict what every user gets with its
// live plan, overrides and quota usage.
type SimulateRequest struct {
	// Demand is a --demand SPEC (see shaperd --simulate); "" is each
	// user's measured rate at the last reconcile, or max for a user at its
	// ceiling (it would take more).
	Demand string `json:"demand,omitempty"`
	// Set are what-if overrides, TARGET=RATE[:CEIL], applied to the
	// simulation only.
	Set []string `json:"set,omitempty"`
}

// SimulateResponse is the prediction: Text as shaperd --simulate prints
// it, Report as its --json, and Users for joining with status.
type SimulateResponse struct {
	Text   string          `json:"text"`
	Report json.RawMessage `json:"report"`
	Users  []SimulatedUser `json:"users"`
}

// SimulatedUser is one user's predicted rate on one interface.
type SimulatedUser struct {
	User          string  `json:"user"`
	Interface     string  `json:"interface"`
	Direction     string  `json:"direction"` // "download" or "upload"
	BitsPerSecond float64 `json:"bits_per_second"`
	// LimitedBy says what keeps the user from more: "demand", "ceil (tier
	// gold)", "parent (interface)", "prio", "share", ...
	LimitedBy string `json:"limited_by"`
}

// PlanDiffResponse is what reloading the configuration file now would
// change, without changing it: Text as shaperd --check --diff prints it.
type PlanDiffResponse struct {
	Text string `json:"text"`
	// Changes counts the kernel writes a reload would take.
	Changes int `json:"changes"`
}

func (s *Server) handleSimulate(ctx context.Context, r *http.Request) (any, error) {
	var req SimulateRequest
	if _, err := decodeBody(r.Body, &req); err != nil {
		return nil, err
	}
	resp, err := s.svc.Simulate(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	return resp, nil
}

func (s *Server) handlePlanDiff(ctx context.Context, _ *http.Request) (any, error) {
	resp, err := s.svc.PlanDiff(ctx)
	if err != nil {
		return nil, fmt.Errorf("reload --dry-run: %w", err)
	}
	return resp, nil
}

// Simulate asks what every user would get (see SimulateRequest).
func (c *Client) Simulate(ctx context.Context, req SimulateRequest) (*SimulateResponse, error) {
	var resp SimulateResponse
	if err := c.do(ctx, http.MethodPost, "/v1/simulate", req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// PlanDiff asks what reloading the configuration would change.
func (c *Client) PlanDiff(ctx context.Context) (*PlanDiffResponse, error) {
	var resp PlanDiffResponse
	if err := c.do(ctx, http.MethodGet, "/v1/reload/dry-run", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
