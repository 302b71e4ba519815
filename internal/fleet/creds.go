package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
)

// UseTLS reports whether the clients of f speak TLS to etcd: when f names
// a CA or a client certificate, or its first endpoint is https://.
func UseTLS(f *config.Fleet) bool {
	return f.CA != "" || f.Cert != "" || len(f.Endpoints) > 0 && strings.HasPrefix(f.Endpoints[0], "https://")
}

// TLSConfig builds the TLS settings of fleet.ca (none: the system's
// roots), fleet.cert and fleet.key (none: no client certificate); TLS 1.2
// at least.
func TLSConfig(f *config.Fleet) (*tls.Config, error) {
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

// Password reads fleet.password_file: its first line, without the line
// end ("\n" or "\r\n"). It is "" when f has no fleet.username.
func Password(f *config.Fleet) (string, error) {
	if f.Username == "" {
		return "", nil
	}
	b, err := os.ReadFile(f.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("fleet.password_file: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(pw, "\r"), nil
}
