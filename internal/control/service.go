package control

import "context"

// Service is what the daemon offers over the control socket. The server
// validates requests before calling it (see SetRateRequest.Validate) and
// maps the errors it returns to HTTP statuses:
//
//   - *NotFoundError: 404 (unknown target)
//   - *BadRequestError: 400 (a request the daemon cannot honour)
//   - *ForbiddenError: 403 (the server also refuses callers by role before
//     calling the Service; see Access)
//   - *ValidationError: 422 (a reload refused; the old config stays)
//   - ErrUnavailable, context.DeadlineExceeded: 503
//   - anything else: 500
//
// Every method must honour ctx: the server cancels it when the request times
// out or the client goes away. Methods may be called concurrently.
type Service interface {
	// Status returns the current state of every interface and user.
	Status(ctx context.Context) (*Status, error)
	// SetRate overrides a target's rates. req has been validated and
	// req.Ceil is non-nil.
	SetRate(ctx context.Context, req SetRateRequest) (*SetRateResponse, error)
	// Clear removes the overrides of req.Target (validated with
	// ParseDirectedTarget) in req.Direction ("": all of them). Nothing to
	// clear is not an error: the answer lists nothing cleared.
	Clear(ctx context.Context, req ClearRequest) (*ClearResponse, error)
	// Reload rereads the configuration and swaps it in when valid, and
	// answers with the result applied (the interfaces' states); when not,
	// it returns a *ValidationError listing the problems and keeps the old
	// one. A reload removing more users than daemon.max_reload_removals
	// allows is refused that way unless req.AllowRemovals.
	Reload(ctx context.Context, req ReloadRequest) (*ReloadStatus, error)
	// Top is Status with the traffic counters read from the kernel for
	// this request (shaperctl top's refresh), not those of the last
	// reconcile.
	Top(ctx context.Context) (*Status, error)
	// Overrides lists the overrides in force.
	Overrides(ctx context.Context) (*OverridesResponse, error)
	// ResetQuota sets a user's quota usage of the current period to zero.
	ResetQuota(ctx context.Context, req QuotaResetRequest) (*QuotaResetResponse, error)
	// Simulate predicts what every user gets (see SimulateRequest); a bad
	// demand spec or what-if is a *BadRequestError.
	Simulate(ctx context.Context, req SimulateRequest) (*SimulateResponse, error)
	// PlanDiff reads the configuration file and says what reloading it
	// would change, changing nothing; an invalid file is a *ValidationError.
	PlanDiff(ctx context.Context) (*PlanDiffResponse, error)
	// ChangeUser adds, changes or removes a run-time user (req checked:
	// a known Op and a name); a change the plan refuses is a
	// *BadRequestError naming why, an unknown user a *NotFoundError.
	ChangeUser(ctx context.Context, req UserRequest) (*UserResponse, error)
	// Users lists every user (users.toml's and run-time ones).
	Users(ctx context.Context) (*UserListResponse, error)
	// ChangeNode adds or removes a run-time node (req checked: a known Op,
	// a name, a rate for add); a change the plan refuses is a
	// *BadRequestError naming why, an unknown node a *NotFoundError.
	ChangeNode(ctx context.Context, req NodeRequest) (*NodeResponse, error)
	// Nodes lists every node (the configuration's and run-time ones),
	// parents first.
	Nodes(ctx context.Context) (*NodeListResponse, error)
}
