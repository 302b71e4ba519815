package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// FuzzLoad feeds arbitrary text as the main and the users file. Load must
// not panic; it returns either a Plan that keeps the Plan's invariants or
// an *Errors whose every entry names its file and a position.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"../../configs/shaperd.toml", "../../configs/users.toml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data), "")
	}
	f.Add(bigMain, usersFile(3))
	bad, _ := filepath.Glob("testdata/bad/*.txt")
	for _, path := range bad {
		a := readArchive(f, path)
		f.Add(a.files["shaperd.toml"], a.files["users.toml"])
	}
	f.Add("[[interface]]\nname=\"a\"\nbandwidth=\"1mbit\"\n[tiers.x]\nrate=\"1mbit\"\n[[tiers.x.schedule]]\ndays=[\"mon\"]\nfrom=\"23:00\"\nto=\"01:00\"\nceil=\"2mbit\"",
		"user=[{name=\"a\",tier=\"x\",addresses=[\"::/0\",\"0.0.0.0/0\"]}]")
	f.Fuzz(func(t *testing.T, main, users string) {
		fsys := fstest.MapFS{"shaperd.toml": {Data: []byte(main)}, "users.toml": {Data: []byte(users)}}
		plan, err := LoadFS(fsys, "shaperd.toml")
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.List) == 0 || plan != nil {
				t.Fatalf("bad error result: plan %v, err %T %v", plan != nil, err, err)
			}
			for _, e := range errs.List {
				if e.File == "" || e.Msg == "" || e.Line < 1 || e.Col < 1 {
					t.Fatalf("error without file, message or position: %#v", e)
				}
			}
			return
		}
		for _, tier := range plan.Tiers {
			if tier.Rate < MinRate || tier.Ceil < tier.Rate || tier.UploadCeil < tier.UploadRate || !ValidName(tier.Name) {
				t.Fatalf("invalid tier in a plan: %+v", tier)
			}
			for _, s := range tier.Schedules {
				if s.Ceil < s.Rate || s.UploadCeil < s.UploadRate || s.From == s.To || s.Days == 0 {
					t.Fatalf("invalid schedule in a plan: %+v", s)
				}
			}
		}
		for _, in := range plan.Interfaces {
			if in.Bandwidth < MinRate || checkIfName(in.Name) != nil || (in.Direction == Ingress) != (in.IFB != "") {
				t.Fatalf("invalid interface in a plan: %+v", in)
			}
		}
		for _, u := range plan.Users {
			if _, ok := plan.Tier(u.Tier); !ok || len(u.Prefixes) == 0 {
				t.Fatalf("invalid user in a plan: %+v", u)
			}
		}
	})
}
