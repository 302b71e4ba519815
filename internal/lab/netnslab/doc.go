// Package netnslab builds small network labs in Linux network namespaces for
// shaperd's integration tests: namespaces with unique names, veth pairs,
// addresses, routes, forwarding, commands run inside a namespace, and iperf3
// throughput measurements.
//
// Everything a helper creates is removed by t.Cleanup, also when the test
// fails. Deleting a namespace removes the veth and IFB devices inside it, so
// cleanup only deletes namespaces and stops processes. Only the benchmarking
// range 198.18.0.0/15 and the IPv6 documentation prefix 2001:db8::/32 are used.
//
// The standard lab is NewRouterLab: a router namespace between a lan
// namespace (the users' hosts) and a wan namespace (the internet). shaperd
// shapes the router's lan-facing device: its egress carries downloads to the
// users, its ingress (redirected to an IFB device) carries their uploads.
//
// Tests call Require first: it skips when the test cannot make namespaces
// (not root, no iproute2), unless SHAPERD_REQUIRE_NETNS=1 is set, in which
// case it fails the test instead.
package netnslab
