package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shaperd/shaperd/pkg/config"
)

// Dial returns an etcd client for the [fleet] table: its endpoints, dial
// timeout, TLS files and credentials. It does not wait for a connection:
// requests fail (or wait, with their context) while etcd is unreachable,
// and the client keeps retrying in the background.
func Dial(f *config.Fleet) (*clientv3.Client, error) {
	if f == nil {
		return nil, errors.New("fleet: the configuration has no [fleet] table")
	}
	cfg := clientv3.Config{
		Endpoints:   f.Endpoints,
		DialTimeout: f.DialTimeout,
		Logger:      zap.NewNop(),
	}
	if f.CA != "" || f.Cert != "" || strings.HasPrefix(f.Endpoints[0], "https://") {
		tc, err := tlsConfig(f)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	if f.Username != "" {
		b, err := os.ReadFile(f.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("fleet.password_file: %w", err)
		}
		pw, _, _ := strings.Cut(string(b), "\n")
		cfg.Username, cfg.Password = f.Username, strings.TrimRight(pw, "\r")
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(f.Endpoints, ","), err)
	}
	return c, nil
}

// tlsConfig builds the TLS settings of fleet.ca, cert and key.
func tlsConfig(f *config.Fleet) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("fleet.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fleet.ca: %s holds no PEM certificate", f.CA)
		}
		tc.RootCAs = pool
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("fleet.cert/fleet.key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
