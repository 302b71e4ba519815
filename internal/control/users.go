package control

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// User operations (UserRequest.Op), one shaperctl user subcommand each.
const (
	UserAdd           = "add"
	UserSetAddresses  = "set-addresses"
	UserAddAddress    = "add-address"
	UserRemoveAddress = "remove-address"
	UserRemove        = "remove"
	UserMove          = "move"
)

// Sources of a user (ListedUser.Source, UserStatus.Source).
const (
	SourceFile    = "users.toml"
	SourceRuntime = "runtime"
)

// userOps are the operations and the endpoint path of each.
var userOps = map[string]string{
	UserAdd:           "/v1/user/add",
	UserSetAddresses:  "/v1/user/set-addresses",
	UserAddAddress:    "/v1/user/add-address",
	UserRemoveAddress: "/v1/user/remove-address",
	UserRemove:        "/v1/user/remove",
	UserMove:          "/v1/user/move",
}

// UserRequest changes a run-time user (shaperctl user ...). Which fields
// count depends on Op: add takes Tier, Addresses, Rate and Ceil;
// set-addresses takes Addresses (all of them); add-address and
// remove-address one address in Addresses (add-address optionally For,
// after which the address ends by itself); remove takes only Name.
type UserRequest struct {
	Op        string    `json:"op"`
	Name      string    `json:"name"`
	Tier      string    `json:"tier,omitempty"`
	Addresses []string  `json:"addresses,omitempty"`
	Rate      *tbf.Rate `json:"rate,omitempty"`
	Ceil      *tbf.Rate `json:"ceil,omitempty"`
	For       *Duration `json:"for,omitempty"`
	// Node is the node ([nodes.NAME]) the user is behind: for add
	// (optional) and move ("" moves the user out of every node).
	Node string `json:"node,omitempty"`
}

// ListedUser is one user as user list shows it.
type ListedUser struct {
	Name string `json:"name" out:"user"`
	Tier string `json:"tier"`
	// Source is SourceFile or SourceRuntime.
	Source    string          `json:"source"`
	Addresses []ListedAddress `json:"addresses"`
	// Rate and Ceil are the user's own (0: the tier's).
	Rate tbf.Rate `json:"rate,omitempty"`
	Ceil tbf.Rate `json:"ceil,omitempty"`
	// Node is the node the user is behind; "" for none.
	Node string `json:"node,omitempty"`
}

// ListedAddress is one address of a user; Until is set for an address
// that ends by itself (add-address --for).
type ListedAddress struct {
	Address string     `json:"address"`
	Until   *time.Time `json:"until,omitempty"`
}

// UserResponse answers a user change: the user after it (nil after
// remove), and Note for what else happened.
type UserResponse struct {
	Op   string      `json:"op"`
	Name string      `json:"name" out:"user"`
	User *ListedUser `json:"user,omitempty" out:"details,omitempty"`
	Note string      `json:"note,omitempty"`
}

// UserListResponse lists every user, in plan order (users.toml first).
type UserListResponse struct {
	Users []ListedUser `json:"users"`
}

// check validates what the server can without the plan.
func (r *UserRequest) check() error {
	if _, ok := userOps[r.Op]; !ok {
		return BadRequest("unknown user operation %q", r.Op)
	}
	if r.Name == "" {
		return BadRequest("user %s: no user name given", r.Op)
	}
	switch r.Op {
	case UserAdd:
		if r.Tier == "" {
			return BadRequest("user add %s: no tier given (--tier)", r.Name)
		}
	case UserAddAddress, UserRemoveAddress:
		if len(r.Addresses) != 1 {
			return BadRequest("user %s %s: expected one address, got %d", r.Op, r.Name, len(r.Addresses))
		}
	case UserSetAddresses:
		if len(r.Addresses) == 0 {
			return BadRequest("user set-addresses %s: no addresses given (user remove deletes the user)", r.Name)
		}
	}
	if r.Node != "" && r.Op != UserAdd && r.Op != UserMove {
		return BadRequest("user %s %s: a node goes with add and move only", r.Op, r.Name)
	}
	if r.For != nil && (r.Op != UserAddAddress || r.For.Std() <= 0) {
		return BadRequest("user %s %s: --for takes a positive duration and goes with add-address only", r.Op, r.Name)
	}
	return nil
}

func (s *Server) userHandler(op string) func(context.Context, *http.Request) (any, error) {
	return func(ctx context.Context, r *http.Request) (any, error) {
		var req UserRequest
		if _, err := decodeBody(r.Body, &req); err != nil {
			return nil, err
		}
		if req.Op == "" {
			req.Op = op
		}
		if req.Op != op {
			return nil, BadRequest("operation %q sent to the endpoint of %q", req.Op, op)
		}
		if err := req.check(); err != nil {
			return nil, err
		}
		resp, err := s.svc.ChangeUser(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("user %s %s: %w", op, req.Name, err)
		}
		if resp == nil {
			return nil, fmt.Errorf("user %s %s: the daemon returned no answer", op, req.Name)
		}
		return resp, nil
	}
}

func (s *Server) handleUsers(ctx context.Context, _ *http.Request) (any, error) {
	resp, err := s.svc.Users(ctx)
	if err != nil {
		return nil, fmt.Errorf("user list: %w", err)
	}
	return resp, nil
}

// userRoutes adds the user endpoints to routes.
func (s *Server) userRoutes() {
	for op, path := range userOps {
		s.routes[path] = route{"user " + op, RoleAdmin, s.endpoint(http.MethodPost, s.userHandler(op))}
	}
	s.routes["/v1/users"] = route{"user list", RoleRead, s.endpoint(http.MethodGet, s.handleUsers)}
}

// ChangeUser adds, changes or removes a run-time user (see UserRequest).
func (c *Client) ChangeUser(ctx context.Context, req UserRequest) (*UserResponse, error) {
	path, ok := userOps[req.Op]
	if !ok {
		return nil, fmt.Errorf("unknown user operation %q (want %s)", req.Op, strings.Join(UserOps(), ", "))
	}
	var resp UserResponse
	if err := c.do(ctx, http.MethodPost, path, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Users lists every user with its source.
func (c *Client) Users(ctx context.Context) (*UserListResponse, error) {
	var resp UserListResponse
	if err := c.do(ctx, http.MethodGet, "/v1/users", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// UserOps returns the user operations in the order help lists them.
func UserOps() []string {
	return []string{UserAdd, UserSetAddresses, UserAddAddress, UserRemoveAddress, UserRemove, UserMove}
}
