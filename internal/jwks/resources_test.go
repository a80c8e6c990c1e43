package jwks

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// TestDesiredObjects: what nginx's phase applies and what deletion removes, in their
// order, each labelled with its JWKSConfig.
func TestDesiredObjects(t *testing.T) {
	kinds := func(objs []client.Object) (out []string) {
		for _, o := range objs {
			out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
			if o.GetLabels()[jwksv1alpha1.OwnerLabel] != "idp" {
				t.Errorf("%s/%s is not labelled with its JWKSConfig", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
			}
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		spec           jwksv1alpha1.JWKSConfigSpec
		nginx, deleted []string
	}{
		{"defaults", jwksv1alpha1.JWKSConfigSpec{},
			[]string{"ConfigMap/idp-nginx", "Deployment/idp", "Service/idp"},
			[]string{"Deployment/idp", "Service/idp", "ConfigMap/idp-nginx"}},
		{"cleanupOnDelete and names", jwksv1alpha1.JWKSConfigSpec{CleanupOnDelete: true, ConfigMapName: "set", NginxConfigMapName: "conf"},
			[]string{"ConfigMap/conf", "Deployment/idp", "Service/idp"},
			[]string{"Deployment/idp", "Service/idp", "ConfigMap/conf", "ConfigMap/set"}},
		{"nginx off: the same objects, to delete", jwksv1alpha1.JWKSConfigSpec{Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}},
			[]string{"ConfigMap/idp-nginx", "Deployment/idp", "Service/idp"},
			[]string{"Deployment/idp", "Service/idp", "ConfigMap/idp-nginx"}},
	} {
		cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "idp"}, Spec: tc.spec}
		if got := kinds(desiredNginx(cfg, DefaultNginxImage)); !slices.Equal(got, tc.nginx) {
			t.Errorf("%s: desiredNginx = %v, want %v", tc.name, got, tc.nginx)
		}
		if got := kinds(deletedObjects(cfg, DefaultNginxImage)); !slices.Equal(got, tc.deleted) {
			t.Errorf("%s: deletedObjects = %v, want %v", tc.name, got, tc.deleted)
		}
		// What nginx off looks up to delete is what nginx on applies.
		if named, made := typedNames(nginxObjects(cfg)), typedNames(desiredNginx(cfg, DefaultNginxImage)); !slices.Equal(named, made) {
			t.Errorf("%s: nginxObjects = %v, desiredNginx makes %v", tc.name, named, made)
		}
	}
}

// typedNames are the objects' Go types, namespaces and names.
func typedNames(objs []client.Object) (out []string) {
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName()))
	}
	return out
}
