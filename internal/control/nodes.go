package control

import (
	"context"
	"fmt"
	"net/http"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Node operations (NodeRequest.Op), one shaperctl node subcommand each.
const (
	NodeAdd    = "add"
	NodeRemove = "remove"
)

// nodeOps are the operations and the endpoint path of each.
var nodeOps = map[string]string{
	NodeAdd:    "/v1/node/add",
	NodeRemove: "/v1/node/remove",
}

// NodeRequest adds or removes a run-time node (shaperctl node ...): add
// takes Parent (a node's name or path; "" for a top-level node), Rate
// (required), Ceil, UploadRate, UploadCeil (defaulting as in [nodes.NAME])
// and Interfaces (default: the parent's, or every HTB interface); remove
// takes only Name.
type NodeRequest struct {
	Op         string    `json:"op"`
	Name       string    `json:"name"`
	Parent     string    `json:"parent,omitempty"`
	Rate       *tbf.Rate `json:"rate,omitempty"`
	Ceil       *tbf.Rate `json:"ceil,omitempty"`
	UploadRate *tbf.Rate `json:"upload_rate,omitempty"`
	UploadCeil *tbf.Rate `json:"upload_ceil,omitempty"`
	Interfaces []string  `json:"interfaces,omitempty"`
}

// ListedNode is one node as node list shows it.
type ListedNode struct {
	Name string `json:"name" out:"node"`
	// Path is the names from the top-level node down to this one.
	Path   string `json:"path"`
	Parent string `json:"parent,omitempty"`
	// Source is SourceRuntime, or where the node is written
	// ("FILE:LINE:COL").
	Source     string   `json:"source"`
	Rate       tbf.Rate `json:"rate"`
	Ceil       tbf.Rate `json:"ceil"`
	UploadRate tbf.Rate `json:"upload_rate"`
	UploadCeil tbf.Rate `json:"upload_ceil"`
	Interfaces []string `json:"interfaces,omitempty"`
}

// NodeResponse answers a node change: the node after it (nil after
// remove), and Note for what else happened.
type NodeResponse struct {
	Op   string      `json:"op"`
	Name string      `json:"name" out:"node"`
	Node *ListedNode `json:"node,omitempty" out:"details,omitempty"`
	Note string      `json:"note,omitempty"`
}

// NodeListResponse lists every node, parents first.
type NodeListResponse struct {
	Nodes []ListedNode `json:"nodes"`
}

// check validates what the server can without the plan.
func (r *NodeRequest) check() error {
	if _, ok := nodeOps[r.Op]; !ok {
		return BadRequest("unknown node operation %q", r.Op)
	}
	if r.Name == "" {
		return BadRequest("node %s: no node name given", r.Op)
	}
	switch r.Op {
	case NodeAdd:
		if r.Rate == nil || *r.Rate == 0 {
			return BadRequest("node add %s: no rate given (--rate)", r.Name)
		}
	case NodeRemove:
		if r.Parent != "" || r.Rate != nil || r.Ceil != nil || r.UploadRate != nil || r.UploadCeil != nil || len(r.Interfaces) > 0 {
			return BadRequest("node remove %s: takes only the node's name", r.Name)
		}
	}
	return nil
}

func (s *Server) nodeHandler(op string) func(context.Context, *http.Request) (any, error) {
	return func(ctx context.Context, r *http.Request) (any, error) {
		var req NodeRequest
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
		resp, err := s.svc.ChangeNode(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("node %s %s: %w", op, req.Name, err)
		}
		if resp == nil {
			return nil, fmt.Errorf("node %s %s: the daemon returned no answer", op, req.Name)
		}
		return resp, nil
	}
}

func (s *Server) handleNodes(ctx context.Context, _ *http.Request) (any, error) {
	resp, err := s.svc.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("node list: %w", err)
	}
	return resp, nil
}

// nodeRoutes adds the node endpoints to routes.
func (s *Server) nodeRoutes() {
	for op, path := range nodeOps {
		s.routes[path] = route{"node " + op, RoleAdmin, s.endpoint(http.MethodPost, s.nodeHandler(op))}
	}
	s.routes["/v1/nodes"] = route{"node list", RoleRead, s.endpoint(http.MethodGet, s.handleNodes)}
}

// ChangeNode adds or removes a run-time node (see NodeRequest).
func (c *Client) ChangeNode(ctx context.Context, req NodeRequest) (*NodeResponse, error) {
	path, ok := nodeOps[req.Op]
	if !ok {
		return nil, fmt.Errorf("unknown node operation %q (want add or remove)", req.Op)
	}
	var resp NodeResponse
	if err := c.do(ctx, http.MethodPost, path, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Nodes lists every node with its source.
func (c *Client) Nodes(ctx context.Context) (*NodeListResponse, error) {
	var resp NodeListResponse
	if err := c.do(ctx, http.MethodGet, "/v1/nodes", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
