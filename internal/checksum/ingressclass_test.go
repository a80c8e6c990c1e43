package checksum

import (
	"testing"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
)

// TestTengineIngressClassRules mirrors, one row per rule, which Ingresses a Tengine-Ingress
// keeps and so hashes in its ingCheck. Tengine-Ingress is not on the module proxy; the
// rules come from alibaba/tengine-ingress:
//
//   - cmd/nginx/flags.go: --ingress-class (default "tengine"), --controller-class (default
//     "k8s.io/tengine-ingress"), --watch-ingress-without-class, --ingress-class-by-name.
//   - internal/ingress/controller/ingressclass/ingressclass.go: the annotation key
//     kubernetes.io/ingress.class and the two defaults.
//   - internal/ingress/controller/store/store.go: GetIngressClass (which Ingress is kept)
//     and ingressClassEventHandler.AddFunc (which IngressClass its store holds).
//   - internal/ingress/controller/ingcheck.go getIngID: an Ingress without a version has
//     no ID, whatever its class.
//   - cmd/nginx/main.go: a Tengine-Ingress forbidden to list IngressClasses sets
//     IgnoreIngressClass, and GetIngressClass then skips spec.ingressClassName.
//
// Today's API server refuses an Ingress whose annotation and spec.ingressClassName
// differ; the rows with both stand for Ingresses stored before it did.
func TestTengineIngressClassRules(t *testing.T) {
	const va = DefaultVersionAnnotation
	classes := map[string]string{ // name → spec.controller
		"tengine":         DefaultControllerClass,
		"tengine-default": DefaultControllerClass, // marked default: Tengine never reads that
		"nginx":           "k8s.io/ingress-nginx",
		"internal":        "example.com/internal-gateway",
	}
	lookup := func(name string) (string, bool) { c, ok := classes[name]; return c, ok }
	defaults := DefaultIngressClassOptions()
	withoutClass := defaults
	withoutClass.WatchWithoutClass = true
	internalClass := defaults
	internalClass.IngressClass = "internal"
	internalByName := internalClass
	internalByName.IngressClassByName = true
	otherController := defaults
	otherController.ControllerClass = "example.com/internal-gateway"
	noClassAccess := defaults
	noClassAccess.IgnoreIngressClass = true
	noClassAccessWithoutClass := withoutClass
	noClassAccessWithoutClass.IgnoreIngressClass = true
	name := func(s string) *string { return &s }
	annotated := func(class string) map[string]string {
		return map[string]string{va: "3", IngressClassAnnotation: class}
	}
	versioned := map[string]string{va: "3"}

	for _, tc := range []struct {
		rule        string
		source      string // the upstream file the rule comes from
		opts        IngressClassOptions
		className   *string
		annotations map[string]string
		wantReason  string // "" = kept, with ID 12-3
	}{
		{rule: "the annotation with the default --ingress-class is kept", source: "ingressclass/ingressclass.go DefaultAnnotationValue; store.go GetIngressClass",
			opts: defaults, annotations: annotated("tengine")},
		{rule: "another class in the annotation is left out", source: "store.go GetIngressClass",
			opts: defaults, annotations: annotated("nginx"), wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "an empty annotation is a class, and not tengine", source: "store.go GetIngressClass (ok, then !=)",
			opts: defaults, annotations: annotated(""), wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "--ingress-class names the annotation value", source: "cmd/nginx/flags.go ingress-class",
			opts: internalClass, annotations: annotated("internal")},
		{rule: "with another --ingress-class, tengine is another class", source: "cmd/nginx/flags.go ingress-class",
			opts: internalClass, annotations: annotated("tengine"), wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "no class is left out by default", source: "cmd/nginx/flags.go watch-ingress-without-class (false); store.go GetIngressClass",
			opts: defaults, annotations: versioned, wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "no class is kept with --watch-ingress-without-class", source: "store.go GetIngressClass (\"_\")",
			opts: withoutClass, annotations: versioned},
		{rule: "--watch-ingress-without-class does not take another annotated class", source: "store.go GetIngressClass",
			opts: withoutClass, annotations: annotated("nginx"), wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "ingressClassName of an IngressClass with Tengine's controller is kept", source: "ingressclass/ingressclass.go DefaultControllerName; store.go AddFunc",
			opts: defaults, className: name("tengine"), annotations: versioned},
		{rule: "ingressClassName of another controller's IngressClass is left out", source: "store.go AddFunc (spec.controller)",
			opts: defaults, className: name("nginx"), annotations: versioned, wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "ingressClassName decides before the annotation: tengine's class with an nginx annotation is kept", source: "store.go GetIngressClass (\"First we try ingressClassName\")",
			opts: defaults, className: name("tengine"), annotations: annotated("nginx")},
		{rule: "ingressClassName decides before the annotation: nginx's class with a tengine annotation is left out", source: "store.go GetIngressClass",
			opts: defaults, className: name("nginx"), annotations: annotated("tengine"), wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "ingressClassName naming no IngressClass is left out, despite the annotation", source: "store.go GetIngressClass (ByKey error returned)",
			opts: defaults, className: name("missing"), annotations: annotated("tengine"), wantReason: tenginev1alpha1.ReasonIngressClassNotFound},
		{rule: "ingressClassName naming no IngressClass is left out, despite --watch-ingress-without-class", source: "store.go GetIngressClass",
			opts: withoutClass, className: name("missing"), annotations: versioned, wantReason: tenginev1alpha1.ReasonIngressClassNotFound},
		{rule: "--controller-class names the controller", source: "cmd/nginx/flags.go controller-class; store.go AddFunc",
			opts: otherController, className: name("internal"), annotations: versioned},
		{rule: "with another --controller-class, k8s.io/tengine-ingress is another controller", source: "store.go AddFunc",
			opts: otherController, className: name("tengine"), annotations: versioned, wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "--ingress-class-by-name: the IngressClass named --ingress-class is kept, whatever its controller", source: "cmd/nginx/flags.go ingress-class-by-name; store.go AddFunc (foundClassByName)",
			opts: internalByName, className: name("internal"), annotations: versioned},
		{rule: "without --ingress-class-by-name the name alone does not make it Tengine's", source: "store.go AddFunc",
			opts: internalClass, className: name("internal"), annotations: versioned, wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "--ingress-class-by-name still holds the classes of --controller-class", source: "store.go AddFunc",
			opts: internalByName, className: name("tengine"), annotations: versioned},
		{rule: "IngressClasses not readable: ingressClassName is ignored, the annotation decides", source: "cmd/nginx/main.go IgnoreIngressClass; store.go GetIngressClass",
			opts: noClassAccess, className: name("nginx"), annotations: annotated("tengine")},
		{rule: "IngressClasses not readable: Tengine's own class name alone is no class", source: "cmd/nginx/main.go IgnoreIngressClass; store.go GetIngressClass",
			opts: noClassAccess, className: name("tengine"), annotations: versioned, wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "IngressClasses not readable: any class name counts as none with --watch-ingress-without-class", source: "cmd/nginx/main.go IgnoreIngressClass; store.go GetIngressClass",
			opts: noClassAccessWithoutClass, className: name("missing"), annotations: versioned},
		{rule: "a default IngressClass does not adopt an Ingress without a class", source: "store.go GetIngressClass (never reads is-default-class)",
			opts: defaults, annotations: versioned, wantReason: tenginev1alpha1.ReasonOtherClass},
		{rule: "an unversioned Ingress has no ID, whatever its class", source: "ingcheck.go getIngID",
			opts: defaults, className: name("nginx"), annotations: map[string]string{}, wantReason: tenginev1alpha1.ReasonNotVersioned},
		{rule: "a versioned Ingress of Tengine's class with a bad version is left out for it", source: "ingcheck.go getIngID",
			opts: defaults, annotations: map[string]string{va: "0", IngressClassAnnotation: "tengine"}, wantReason: tenginev1alpha1.ReasonNoVersion},
		{rule: "another class is another controller's: its bad version is not ours to report", source: "store.go (class is checked when the Ingress is added)",
			opts: defaults, annotations: map[string]string{va: "x", IngressClassAnnotation: "nginx"}, wantReason: tenginev1alpha1.ReasonOtherClass},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			id, err := tc.opts.IngressIDOfClass("web-0012", tc.annotations, tc.className, va, lookup)
			if tc.wantReason == "" {
				if err != nil || id != "12-3" {
					t.Errorf("(%s) got %q, %v; want kept as 12-3", tc.source, id, err)
				}
				return
			}
			l, ok := IsLeftOut(err)
			if !ok || l.Reason != tc.wantReason || id != "" {
				t.Errorf("(%s) got %q, %v; want left out for %s", tc.source, id, err, tc.wantReason)
			}
		})
	}
}

// Only a missing IngressClass is worth telling the Ingress's owner: another class is
// another controller's Ingress.
func TestWhichLeftOutIngressesAreReported(t *testing.T) {
	for reason, quiet := range map[string]bool{
		tenginev1alpha1.ReasonNotVersioned: true, tenginev1alpha1.ReasonOtherClass: true, tenginev1alpha1.ReasonIngressClassNotFound: false, tenginev1alpha1.ReasonNoNumericID: false,
	} {
		if got := (&LeftOut{Reason: reason}).NotMeantForChecksum(); got != quiet {
			t.Errorf("%s: NotMeantForChecksum %v, want %v", reason, got, quiet)
		}
	}
}
