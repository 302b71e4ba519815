package check

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
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
	avail := kernel.BPFClassifierAvailable()
	for _, in := range plan.Interfaces {
		if in.Shaper == config.ShaperTBF {
			continue
		}
		kind, why, err := ChooseClassifier(in, avail)
		if err != nil {
			return nil, err
		}
		notes = append(notes, fmt.Sprintf("interface %s (%s): classifier %s (%s)", in.Name, in.Direction, kind, why))
	}
	return notes, nil
}
