package daemon

import (
	"github.com/shaperd/shaperd/internal/check"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
)

// classifierSetter is a kernel whose classifier is chosen per device
// (*kernel.Kernel). Kernels without it (the unit tests' fakes) classify
// as they do.
type classifierSetter interface {
	SetClassifier(device, kind string)
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
		if _, _, err := check.ChooseClassifier(in, avail); err != nil {
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
	kind, why, err := check.ChooseClassifier(st.cfg, kernel.BPFClassifierAvailable())
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
