package jwks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// checkSpec is the first phase: a spec admission would refuse today (InvalidSpec), or
// that asks for more than the operator allows (OverLimit), is not published.
func (r *Reconciler) checkSpec(_ context.Context, s *scope) (ctrl.Result, error) {
	if err := validateSpec(s.cfg); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.Limits.check(s.cfg)
}

// validateSpec refuses what admission refuses today but an older CRD may have stored
// (a duration such as "30d", a quantity such as "1e1.5"): the object then reports
// InvalidSpec, naming every such field, instead of being reconciled with a guess.
func validateSpec(c *jwksv1alpha1.JWKSConfig) error {
	var problems []string
	for _, d := range []struct {
		field string
		value *jwksv1alpha1.Duration
	}{{"spec.oldKeysTTL", c.Spec.OldKeysTTL}, {"spec.cacheMaxAge", c.Spec.CacheMaxAge}} {
		if d.value == nil {
			continue
		}
		if _, err := d.value.Parse(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d.field, err))
		}
	}
	for _, list := range []struct {
		field  string
		values map[corev1.ResourceName]jwksv1alpha1.Quantity
	}{{"limits", c.Spec.Nginx.Resources.Limits}, {"requests", c.Spec.Nginx.Resources.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(list.values)) {
			if q := list.values[name]; !validQuantity(q) {
				problems = append(problems, fmt.Sprintf("spec.nginx.resources.%s[%s]: %q is not a quantity such as 100m, 0.5 or 64Mi", list.field, name, string(q)))
			}
		}
	}
	// Admission refuses these; one stored before the rule has no key to claim or serve.
	if c.Spec.Issuer != "" {
		if _, err := jwkset.IssuerKey(c.Spec.Issuer); err != nil {
			problems = append(problems, fmt.Sprintf("spec.issuer: %v", err))
		}
	}
	if len(problems) > 0 {
		return &jwkset.InputError{Reason: jwksv1alpha1.ReasonInvalidSpec, Message: strings.Join(problems, "; ")}
	}
	return nil
}

func validQuantity(q jwksv1alpha1.Quantity) bool {
	_, err := q.Parse()
	return err == nil
}

// Limits are the operator's bounds on what a JWKSConfig author may ask for: the
// manager runs nginx in her namespace with its own rights, and servers and caches keep
// the set for cacheMaxAge. Zero values are no bound.
type Limits struct {
	// MaxCacheMaxAge bounds spec.cacheMaxAge (--jwks-max-cache-max-age).
	MaxCacheMaxAge time.Duration
	// NginxMaxReplicas bounds spec.nginx.replicas (--jwks-nginx-max-replicas).
	NginxMaxReplicas int32
	// NginxMaxResources bounds each request and limit of the nginx container, by
	// resource name; a resource it does not name may not be asked for
	// (--jwks-nginx-max-resources).
	NginxMaxResources corev1.ResourceList
}

// check refuses a spec over the limits, naming each field and its limit.
func (l Limits) check(c *jwksv1alpha1.JWKSConfig) error {
	var problems []string
	nginx := jwkset.NginxEnabled(c)
	if age := jwkset.CacheMaxAge(c); l.MaxCacheMaxAge > 0 && age > l.MaxCacheMaxAge {
		problems = append(problems, fmt.Sprintf("spec.cacheMaxAge %v is over the operator's maximum %v (--jwks-max-cache-max-age)", age, l.MaxCacheMaxAge))
	}
	if n := ptr.Deref(c.Spec.Nginx.Replicas, defaultReplicas); l.NginxMaxReplicas > 0 && nginx && n > l.NginxMaxReplicas {
		problems = append(problems, fmt.Sprintf("spec.nginx.replicas %d is over the operator's maximum %d (--jwks-nginx-max-replicas)", n, l.NginxMaxReplicas))
	}
	if l.NginxMaxResources != nil && nginx {
		problems = append(problems, l.resourceProblems("limits", c.Spec.Nginx.Resources.Limits)...)
		problems = append(problems, l.resourceProblems("requests", c.Spec.Nginx.Resources.Requests)...)
	}
	if len(problems) > 0 {
		return &jwkset.InputError{Reason: jwksv1alpha1.ReasonOverLimit, Message: strings.Join(problems, "; ")}
	}
	return nil
}

func (l Limits) resourceProblems(field string, values map[corev1.ResourceName]jwksv1alpha1.Quantity) []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(values)) {
		q, err := values[name].Parse()
		if err != nil {
			continue // validateSpec reports it
		}
		limit, ok := l.NginxMaxResources[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("spec.nginx.resources.%s[%s]: the operator allows only %s (--jwks-nginx-max-resources)", field, name, resourceNames(l.NginxMaxResources)))
		case q.Cmp(limit) > 0:
			problems = append(problems, fmt.Sprintf("spec.nginx.resources.%s[%s] %s is over the operator's maximum %s (--jwks-nginx-max-resources)", field, name, q.String(), limit.String()))
		}
	}
	return problems
}

func resourceNames(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
