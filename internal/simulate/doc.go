// Package simulate is `shaperd --simulate`: it loads a configuration,
// evaluates the policy at a given time (schedules and quota periods apply;
// no overrides and no quota usage, as the command runs offline), builds
// every interface's tree as the daemon would and asks pkg/sim what each
// user gets for a demand, then prints a table or JSON.
package simulate
