package control

import "context"

// WithPeer returns ctx carrying p as the request's peer, as the server
// records it for each connection: the tests call Server.ServeHTTP
// directly, and a request without a peer is refused.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}
