// Package fleet keeps what many shaperd routers share in etcd: the shared
// plan (tiers, policy, users), fleet-wide overrides and each router's
// registration. Under the prefix (fleet.prefix, default /shaperd):
//
//	PREFIX/plan/shared        [policy] and [tiers] as TOML   } written in one
//	PREFIX/plan/users         the users file as TOML          } transaction
//	PREFIX/plan/meta          who pushed it, when, from where (JSON)
//	PREFIX/overrides/KEY      a fleet override (policy.Override as JSON);
//	                          KEY is "alice", "tier:gold", "alice/upload", ...;
//	                          one with an expiry is attached to a lease
//	PREFIX/routers/NAME       a router's last registration (JSON), kept
//	PREFIX/alive/NAME         the same, attached to the router's lease:
//	                          present while the router is alive
//	PREFIX/usage/USER/ROUTER  USER's quota usage counted on ROUTER in the
//	                          period starting at "start" (JSON); each router
//	                          writes only its own keys, every router sums
//
// The plan's revision is the etcd revision of the transaction that wrote
// it. Push and Pull are what `shaperctl fleet push|pull` do. They, and the
// other shared requests, take a KV: Client, a small client on etcd's
// generated gRPC stubs (shaperctl, `shaperd --check`), or the daemon's
// clientv3 client through fleetd.KV. The daemon's side (watch,
// registration under a lease, connection state) is package fleetd. This
// package does not import clientv3, so shaperctl does not link it.
package fleet
