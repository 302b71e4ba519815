package fleetd

import (
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/config"
)

// Dial returns an etcd clientv3 client for the [fleet] table: its
// endpoints, dial timeout, TLS files and credentials (as fleet.Dial). It
// does not wait for a connection: requests fail (or wait, with their
// context) while etcd is unreachable, and the client keeps retrying in
// the background. The caller closes it.
func Dial(f *config.Fleet) (*clientv3.Client, error) {
	if f == nil {
		return nil, errors.New("fleet: the configuration has no [fleet] table")
	}
	cfg := clientv3.Config{
		Endpoints:   f.Endpoints,
		DialTimeout: f.DialTimeout,
		Logger:      zap.NewNop(),
	}
	if fleet.UseTLS(f) {
		tc, err := fleet.TLSConfig(f)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	pw, err := fleet.Password(f)
	if err != nil {
		return nil, err
	}
	cfg.Username, cfg.Password = f.Username, pw
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(f.Endpoints, ","), err)
	}
	return c, nil
}
