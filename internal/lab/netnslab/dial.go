package netnslab

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"

	"github.com/vishvananda/netns"
)

// DialContext connects to addr from inside the namespace: the socket is
// created on a thread that has entered the namespace, so loopback
// addresses are the namespace's (a daemon's metrics endpoint started with
// `ip netns exec`). Only literal IP addresses: a resolver would run on
// other threads.
func (n *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netns of this thread: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(n.Name)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netns %s: %w", n.Name, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("enter netns %s: %w", n.Name, err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if serr := netns.Set(orig); serr != nil {
		// This thread stays in the lab's namespace: leave it locked, so
		// it ends with this goroutine instead of serving others.
		return c, err
	}
	runtime.UnlockOSThread()
	return c, err
}

// HTTPClient is an HTTP client whose connections are made inside the
// namespace (see DialContext).
func (n *NS) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true}}
}
