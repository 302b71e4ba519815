// Package config reads and validates shaperd's configuration: the main file
// (shaperd.toml: [daemon], [policy], [[interface]], [tiers.NAME]) and the
// users file it names (users.toml: [[user]]).
//
// Load returns a Plan, the validated configuration with every default filled
// in and every value typed (tbf.Rate, tbf.Size, time.Duration, netip.Prefix,
// *time.Location), or an *Errors holding every problem found, each with the
// file, line and column of the key it concerns:
//
//	shaperd.toml:12:1: tiers.gold.ceil: 5mbit is below rate 10mbit
//
// Keys in messages are written as paths: tables by name ("tiers.gold.ceil"),
// entries of arrays of tables by index from 0 ("interface[1].bandwidth",
// "user[3].addresses[0]").
//
// The package does not touch the kernel: a leaf qdisc kind it accepts may
// be missing from the running kernel. The daemon probes the kinds it knows
// (Plan.LeafKinds) and the policy replaces a missing one by a bfifo; the
// kernel refuses any other missing kind, which the daemon reports.
package config
