// Package fleetd is the daemon's side of fleet mode: the Agent, which
// follows the plan, the fleet overrides and the quota ledger with an etcd
// watch and keeps the router's registration under a lease with
// keep-alive, and the clientv3 client it runs on (Dial, and KV to use it
// for the shared requests of package fleet).
//
// It is apart from package fleet so that shaperctl, which uses
// fleet.Client, links neither clientv3 nor the systemd journal writer
// clientv3's logging imports.
package fleetd
