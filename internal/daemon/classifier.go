package daemon

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
)

// classifierSetter is a kernel whose classifier is chosen per device
// (*kernel.Kernel). Kernels without it (the unit tests' fakes) classify
// as they do.
type classifierSetter interface {
	SetClassifier(device, kind string)
}

// chooseClassifier resolves interface in's classifier key against the
// kernel's answer (avail: nil when the bpf classifier works, else the
// reason): "bpf" where configured or by default where the kernel allows
// it, "u32" where configured or when the kernel refuses bpf and the key is
// absent. why says which for the log and --check. A configured "bpf" the
// kernel refuses is an error naming the interface and the kernel's reason.
func chooseClassifier(in config.Interface, avail error) (kind, why string, err error) {
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

// checkClassifiers returns the error of the first HTB interface of plan
// whose configured classifier the kernel refuses; nil when the kernel does
// not choose classifiers.
func (d *Daemon) checkClassifiers(plan *config.Plan) error {
	if _, ok := d.k.(classifierSetter); !ok {
		return nil
	}
	avail := kernel.BPFClassifierAvailable()
	for _, in := range plan.Interfaces {
		if in.Shaper == config.ShaperTBF {
			continue
		}
		if _, _, err := chooseClassifier(in, avail); err != nil {
			return err
		}
	}
	return nil
}

// setClassifier tells the kernel st's classifier (HTB interfaces) and
// logs the choice when it is new or changed.
func (d *Daemon) setClassifier(st *reconciler) {
	cs, ok := d.k.(classifierSetter)
	if !ok || st.cfg.Shaper == config.ShaperTBF {
		return
	}
	kind, why, err := chooseClassifier(st.cfg, kernel.BPFClassifierAvailable())
	if err != nil {
		return // refused by checkClassifiers before
	}
	cs.SetClassifier(st.device, kind)
	if d.classifiers == nil {
		d.classifiers = map[string]string{}
	}
	if d.classifiers[st.key] != kind {
		d.classifiers[st.key] = kind
		d.log.Info("classifier chosen", "interface", st.key, "device", st.device, "classifier", kind, "why", why)
	}
}

// CheckClassifiers is --check's verdict on the classifiers of plan on this
// kernel (probed as the daemon does): an error for a configured "bpf" the
// kernel refuses, else one note per HTB interface naming its classifier
// and why.
func CheckClassifiers(plan *config.Plan) (notes []string, err error) {
	avail := kernel.BPFClassifierAvailable()
	for _, in := range plan.Interfaces {
		if in.Shaper == config.ShaperTBF {
			continue
		}
		kind, why, err := chooseClassifier(in, avail)
		if err != nil {
			return nil, err
		}
		notes = append(notes, fmt.Sprintf("interface %s (%s): classifier %s (%s)", in.Name, in.Direction, kind, why))
	}
	return notes, nil
}
