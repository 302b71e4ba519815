package control

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/shaperd/shaperd/pkg/tbf"
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
// change, without changing it: Text as shaperd --check --diff prints it
// (shaperctl reload --dry-run), Interfaces the same as data (reload
// --dry-run --json; an older daemon sends none).
type PlanDiffResponse struct {
	Text string `json:"text" out:"-"`
	// Changes counts the kernel writes a reload would take.
	Changes int `json:"changes" out:"change_count"`
	// Note says which users the reload would remove, and whether it needs
	// --allow-removals; "" when it removes none.
	Note string `json:"note,omitempty"`
	// Interfaces is what the reload changes per interface.
	Interfaces []PlanDiffInterface `json:"interfaces,omitempty" out:"interfaces"`
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

// PlanDiffInterface is what a reload would change on one managed
// interface (check.PlanDiff for the wire).
type PlanDiffInterface struct {
	// Interface is the configured interface ("lan0"), Direction its
	// direction ("egress" or "ingress"), Device the device that carries
	// its tree (the IFB device for ingress).
	Interface string `json:"interface"`
	Direction string `json:"direction" out:"interface_direction"`
	Device    string `json:"device"`
	// State is "unchanged" (the kernel holds the plan), "changed" (see
	// Changes), "missing" (no device: shaped with the plan when it
	// appears) or "error" (the plan cannot be built or the kernel not
	// read: see Error).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Changes are the kernel writes the reload would take.
	Changes []PlanChange `json:"changes"`
	// Users are the users whose class would change.
	Users []PlanUserChange `json:"users"`
}

// PlanDiffInterface states.
const (
	PlanUnchanged = "unchanged"
	PlanChanged   = "changed"
	PlanMissing   = "missing"
	PlanError     = "error"
)

// PlanChange is one kernel write (model.Change): Op "add", "change" or
// "delete" of Object "qdisc", "class", "filter" or "redirect" on Device.
type PlanChange struct {
	Op     string `json:"op"`
	Object string `json:"object"`
	Device string `json:"device"`
	// Handle is the qdisc's or class's handle ("1:105"), the class a
	// filter sends to; Kind the qdisc's kind ("htb"); Prefix a filter's
	// address prefix.
	Handle string `json:"handle,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// User, Tier and Node say whose class or filter it is ("" when none).
	User string `json:"user,omitempty"`
	Tier string `json:"tier,omitempty"`
	Node string `json:"node,omitempty"`
	// Before and After are a class's rates before (OpChange, OpDelete)
	// and after (OpAdd, OpChange) the write.
	Before *PlanRates `json:"before,omitempty"`
	After  *PlanRates `json:"after,omitempty"`
	// Text is the change for people ("change class 1:105 (user alice) on
	// lan0").
	Text string `json:"text"`
}

// PlanRates are a class's rates.
type PlanRates struct {
	Rate tbf.Rate `json:"rate"`
	Ceil tbf.Rate `json:"ceil"`
}

// PlanUserChange is one user's class before (the kernel) and after (the
// plan), with the rate sim predicts for it with every class of the
// device backlogged (check.UserDiff).
type PlanUserChange struct {
	User string `json:"user"`
	// New is set for a class the reload creates (Before is then nil).
	New    bool           `json:"new"`
	Before *PlanUserRates `json:"before,omitempty"`
	After  PlanUserRates  `json:"after"`
}

// PlanUserRates are a user class's rates and predicted rate in bit/s.
type PlanUserRates struct {
	Rate      tbf.Rate `json:"rate"`
	Ceil      tbf.Rate `json:"ceil"`
	Predicted tbf.Rate `json:"predicted_rate"`
}
