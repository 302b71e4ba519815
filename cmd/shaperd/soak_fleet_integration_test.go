package main

import (
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// soakFleet is the soak's fleet part (SHAPERD_SOAK_FLEET=1).
type soakFleet struct {
	s *soak
}

const soakFleetConfig = ""

func (f *soakFleet) startEtcd(lab *netnslab.RouterLab)                { f.s.t.Fatal("soak: --fleet is not built yet") }
func (f *soakFleet) opOutage(op *soakOp)                              {}
func (f *soakFleet) opOverride(op *soakOp)                            {}
func (f *soakFleet) check(st *control.Status, mism map[string]string) {}
func (f *soakFleet) explains(at time.Time) bool                       { return false }
func (f *soakFleet) stop()                                            {}
