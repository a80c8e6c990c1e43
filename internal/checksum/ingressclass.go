package checksum

import (
	"fmt"

	"github.com/spf13/pflag"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
)

// Tengine-Ingress's ingress class defaults (alibaba/tengine-ingress
// internal/ingress/controller/ingressclass/ingressclass.go, the defaults of the flags in
// cmd/nginx/flags.go).
const (
	// IngressClassAnnotation is the legacy class annotation (ingressclass.IngressKey).
	IngressClassAnnotation = tenginev1alpha1.IngressClassAnnotation
	// DefaultIngressClass is --ingress-class's default (ingressclass.DefaultAnnotationValue).
	DefaultIngressClass = "tengine"
	// DefaultControllerClass is --controller-class's default, the spec.controller of a
	// Tengine IngressClass (ingressclass.DefaultControllerName).
	DefaultControllerClass = "k8s.io/tengine-ingress"
)

// IngressClassOptions are a Tengine-Ingress's class flags (cmd/nginx/flags.go), which
// decide the Ingresses it keeps and so the IDs its ingCheck hashes.
type IngressClassOptions struct {
	// IngressClass is --ingress-class: the value of the kubernetes.io/ingress.class
	// annotation it serves and, with IngressClassByName, the name of an IngressClass.
	IngressClass string
	// ControllerClass is --controller-class: the spec.controller of its IngressClasses.
	ControllerClass string
	// WatchWithoutClass is --watch-ingress-without-class: also Ingresses without any class.
	WatchWithoutClass bool
	// IngressClassByName is --ingress-class-by-name: the IngressClass named IngressClass
	// is its own whatever its spec.controller.
	IngressClassByName bool
	// IgnoreIngressClass is not a flag: a Tengine-Ingress that may not list IngressClasses
	// (its own deploy/static/rbac.yaml grants none) turns its IngressClass support off and
	// ignores spec.ingressClassName (cmd/nginx/main.go, IgnoreIngressClass).
	IgnoreIngressClass bool
}

// DefaultIngressClassOptions are Tengine-Ingress's defaults.
func DefaultIngressClassOptions() IngressClassOptions {
	return IngressClassOptions{IngressClass: DefaultIngressClass, ControllerClass: DefaultControllerClass}
}

// String is the options as Tengine-Ingress's flags, for logs and messages.
func (o IngressClassOptions) String() string {
	return fmt.Sprintf("--ingress-class=%s --controller-class=%s --watch-ingress-without-class=%t --ingress-class-by-name=%t (IngressClasses ignored: %t)",
		o.IngressClass, o.ControllerClass, o.WatchWithoutClass, o.IngressClassByName, o.IgnoreIngressClass)
}

// IngressClassLookup finds an IngressClass by name: its spec.controller, and whether it
// exists.
type IngressClassLookup func(name string) (controller string, exists bool)

// HoldsClass says whether Tengine-Ingress's IngressClass store holds the IngressClass:
// the one named --ingress-class when --ingress-class-by-name is set, and every one whose
// spec.controller is --controller-class (store/store.go ingressClassEventHandler, AddFunc).
func (o IngressClassOptions) HoldsClass(name, controller string) bool {
	return (o.IngressClassByName && name == o.IngressClass) || controller == o.ControllerClass
}

// Admit is Tengine-Ingress's GetIngressClass (store/store.go): nil when it keeps an
// Ingress with this spec.ingressClassName and these annotations, else a *LeftOut.
//
//   - spec.ingressClassName, when set (and IngressClasses are not ignored), alone decides:
//     the IngressClass must be one its store holds (HoldsClass). A missing class is not
//     ignored in favour of the annotation or --watch-ingress-without-class: the Ingress is
//     left out.
//   - otherwise the kubernetes.io/ingress.class annotation, when present (even empty),
//     must equal --ingress-class exactly.
//   - otherwise the Ingress has no class: kept only with --watch-ingress-without-class.
//
// A default IngressClass (ingressclass.kubernetes.io/is-default-class) plays no part:
// Tengine never reads it. The API server's DefaultIngressClass admission plugin writes
// the default class into spec.ingressClassName of an Ingress created without a class
// while one is default, and that name then decides as any other.
func (o IngressClassOptions) Admit(className *string, annotations map[string]string, classes IngressClassLookup) error {
	if className != nil && !o.IgnoreIngressClass {
		controller, exists := classes(*className)
		switch {
		case !exists:
			return &LeftOut{tenginev1alpha1.ReasonIngressClassNotFound, fmt.Sprintf("spec.ingressClassName %q names no IngressClass", abbreviate(*className))}
		case !o.HoldsClass(*className, controller):
			return &LeftOut{tenginev1alpha1.ReasonOtherClass, fmt.Sprintf("IngressClass %q is for controller %q, not %q", abbreviate(*className), abbreviate(controller), o.ControllerClass)}
		}
		return nil
	}
	if class, ok := annotations[IngressClassAnnotation]; ok {
		if class != o.IngressClass {
			return &LeftOut{tenginev1alpha1.ReasonOtherClass, fmt.Sprintf("annotation %s=%q is not %q", IngressClassAnnotation, abbreviate(class), o.IngressClass)}
		}
		return nil
	}
	if o.WatchWithoutClass {
		return nil
	}
	return &LeftOut{tenginev1alpha1.ReasonOtherClass, "the Ingress has no class, and Tengine-Ingress runs without --watch-ingress-without-class"}
}

// IngressIDOfClass is IngressID for an Ingress a Tengine-Ingress with these options
// keeps. An Ingress without the version annotation stays ReasonNotVersioned (it is not
// meant for the checksum, whatever its class); one of another class is ReasonOtherClass
// before anything else is checked (its name and version are another controller's
// business).
func (o IngressClassOptions) IngressIDOfClass(name string, annotations map[string]string, className *string, versionKey string, classes IngressClassLookup) (string, error) {
	id, err := IngressID(name, annotations, versionKey)
	if l, ok := IsLeftOut(err); ok && l.Reason == tenginev1alpha1.ReasonNotVersioned {
		return "", err
	}
	if classErr := o.Admit(className, annotations, classes); classErr != nil {
		return "", classErr
	}
	return id, err
}

// NotMeantForChecksum says the object is left out because it is not meant for the
// checksum at all (no version, another controller's class): nothing to report.
func (l *LeftOut) NotMeantForChecksum() bool {
	return l.Reason == tenginev1alpha1.ReasonNotVersioned || l.Reason == tenginev1alpha1.ReasonOtherClass
}

// AddFlags registers Tengine-Ingress's class flags (alibaba/tengine-ingress
// cmd/nginx/flags.go) with Tengine's defaults, under Tengine's own names after prefix:
// "" for the data-plane agent, which takes a Tengine-Ingress's flags as they are, and the
// controller's prefix for the manager.
func (o *IngressClassOptions) AddFlags(fs *pflag.FlagSet, prefix string) {
	fs.StringVar(&o.IngressClass, prefix+"ingress-class", o.IngressClass,
		"As Tengine-Ingress's --ingress-class: Ingresses annotated kubernetes.io/ingress.class with this value are counted (and, with --"+prefix+"ingress-class-by-name, those of the IngressClass of this name).")
	fs.StringVar(&o.ControllerClass, prefix+"controller-class", o.ControllerClass,
		"As Tengine-Ingress's --controller-class: Ingresses whose spec.ingressClassName names an IngressClass with this spec.controller are counted.")
	fs.BoolVar(&o.WatchWithoutClass, prefix+"watch-ingress-without-class", o.WatchWithoutClass,
		"As Tengine-Ingress's --watch-ingress-without-class: also count Ingresses without any class.")
	fs.BoolVar(&o.IngressClassByName, prefix+"ingress-class-by-name", o.IngressClassByName,
		"As Tengine-Ingress's --ingress-class-by-name: the IngressClass named --"+prefix+"ingress-class is Tengine's whatever its spec.controller.")
	fs.BoolVar(&o.IgnoreIngressClass, prefix+"ignore-ingress-class", o.IgnoreIngressClass,
		"Set when the Tengine-Ingress may not list IngressClasses (its own deploy/static/rbac.yaml grants none): it then ignores spec.ingressClassName, and so does the count (no IngressClass is read).")
}
