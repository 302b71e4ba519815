package fleet

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/shaperd/shaperd/pkg/config"
)

// Client is a small etcd v3 client for the fleet's shared requests (KV),
// made of etcd's generated gRPC stubs (etcdserverpb) over one gRPC
// connection. shaperctl and `shaperd --check` use it; the daemon uses
// etcd's clientv3 (fleetd), which also watches and keeps leases alive.
// Unlike clientv3 it links no logging or systemd journal code.
//
// A request waits for a connection at most fleet.dial_timeout per
// endpoint: when none accepts one it fails with the connection's error
// (connection refused, a TLS failure, a timeout) rather than waiting until
// its context ends. It is safe for concurrent use.
type Client struct {
	conn  *grpc.ClientConn
	kv    pb.KVClient
	lease pb.LeaseClient
	auth  pb.AuthClient
	user  string
	pass  string

	mu sync.Mutex
	// token is the authentication token sent with each request ("": none);
	// authed is whether token is known (it is "" when etcd's
	// authentication is off).
	token  string
	authed bool
}

var _ KV = (*Client)(nil)

// resolverScheme names the Client's endpoint list as a gRPC target; each
// connection has its own resolver, so one name serves all.
const resolverScheme = "shaperd-etcd"

// Dial returns a Client for the [fleet] table: its endpoints (tried in
// order: the connection goes to the first that accepts it), dial timeout,
// TLS files and credentials (fleet.username and the first line of
// fleet.password_file, sent to etcd at the first request). It does not
// connect: the first request does. Close releases it.
func Dial(f *config.Fleet) (*Client, error) {
	if f == nil {
		return nil, errors.New("fleet: the configuration has no [fleet] table")
	}
	if len(f.Endpoints) == 0 {
		return nil, errors.New("fleet: fleet.endpoints names no etcd endpoint")
	}
	creds := insecure.NewCredentials()
	if UseTLS(f) {
		tc, err := TLSConfig(f)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	pw, err := Password(f)
	if err != nil {
		return nil, err
	}
	eps := make([]resolver.Endpoint, 0, len(f.Endpoints))
	for _, e := range f.Endpoints {
		host, err := hostPort(e)
		if err != nil {
			return nil, err
		}
		// ServerName: what TLS verifies (its host part) and the request's
		// :authority.
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: host, ServerName: host}}})
	}
	r := manual.NewBuilderWithScheme(resolverScheme)
	r.InitialState(resolver.State{Endpoints: eps})
	conn, err := grpc.NewClient(resolverScheme+":///etcd",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: f.DialTimeout}),
		// etcd bounds what it sends by its own limits; a large users
		// document must not hit gRPC's default 4 MiB.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
	)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(f.Endpoints, ","), err)
	}
	return &Client{conn: conn, kv: pb.NewKVClient(conn), lease: pb.NewLeaseClient(conn), auth: pb.NewAuthClient(conn),
		user: f.Username, pass: pw}, nil
}

// hostPort is an endpoint's HOST:PORT: the URL's host for http:// and
// https://, the endpoint itself without a scheme.
func hostPort(endpoint string) (string, error) {
	if !strings.Contains(endpoint, "://") {
		return endpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("fleet.endpoints: %q is not an etcd client URL (http://HOST:PORT or https://HOST:PORT)", endpoint)
	}
	return u.Host, nil
}

// Close closes the connection; requests in flight fail.
func (c *Client) Close() error {
	return c.conn.Close()
}
