package check

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/kernel/bpfcls"
)

// ChooseClassifier resolves interface in's classifier key against the
// kernel's answer (avail: nil when the bpf classifier works, else the
// reason): "bpf" where configured or by default where the kernel allows
// it, "u32" where configured or when the kernel refuses bpf and the key is
// absent. why says which for the log and --check. A configured "bpf" the
// kernel refuses is an error naming the interface and the kernel's reason.
func ChooseClassifier(in config.Interface, avail error) (kind, why string, err error) {
	switch in.Classifier {
	case config.ClassifierU32:
		return kernel.ClassifierU32, "configured", nil
	case config.ClassifierBPF:
		if avail != nil {
			return "", "", fmt.Errorf("%s: interface %s (%s): classifier = \"bpf\", but the kernel refuses it: %w", in.Source, in.Name, in.Direction, avail)
		}
		return kernel.ClassifierBPF, "configured", nil
	}
	if avail != nil {
		return kernel.ClassifierU32, fmt.Sprintf("default; bpf unavailable: %v", avail), nil
	}
	return kernel.ClassifierBPF, "default; the kernel allows bpf", nil
}

// checkClassifiers is --check's verdict on the classifiers of plan on this
// kernel (probed as the daemon does): an error for a configured "bpf" the
// kernel refuses, else one note per HTB interface naming its classifier
// and why.
func checkClassifiers(plan *config.Plan) (notes []string, err error) {
	return classifierNotes(plan, kernel.BPFClassifierAvailable(), bpfcls.BPFFSMounted(""))
}

// classifierNotes is checkClassifiers with the kernel's answers: avail
// (nil: this process may use bpf) and mounted (nil: a bpffs is mounted at
// the pin root's parent). When bpf is allowed only because this process
// may mount a bpffs (CAP_SYS_ADMIN, e.g. root), the note also says what
// the systemd unit, with CAP_NET_ADMIN and CAP_BPF only, chooses there:
// u32 for a default, a refusal for a configured bpf.
func classifierNotes(plan *config.Plan, avail, mounted error) (notes []string, err error) {
	for _, in := range plan.Interfaces {
		if in.Shaper == config.ShaperTBF {
			continue
		}
		kind, why, err := ChooseClassifier(in, avail)
		if err != nil {
			return nil, err
		}
		note := fmt.Sprintf("interface %s (%s): classifier %s (%s)", in.Name, in.Direction, kind, why)
		if kind == kernel.ClassifierBPF && mounted != nil {
			unit := "classifies with u32"
			if in.Classifier == config.ClassifierBPF {
				unit = "refuses to start (classifier = \"bpf\")"
			}
			note += fmt.Sprintf("; as this process runs it (it may mount a bpffs, %v), but under the systemd unit's capabilities (CAP_NET_ADMIN, CAP_BPF) shaperd cannot mount one and %s: mount a bpffs there (systemd does at boot), or set classifier = \"u32\"",
				mounted, unit)
		}
		notes = append(notes, note)
	}
	return notes, nil
}
