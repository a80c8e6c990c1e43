// Package scheme builds the runtime.Scheme that knows every type trustplane reads or writes.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	controlplanev1alpha1 "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	podcertv1alpha1 "github.com/trustplane/trustplane/api/podcert/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
)

// New returns a scheme with the Kubernetes built-in types, CRDs and every trustplane API.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(jwksv1alpha1.AddToScheme(s))
	utilruntime.Must(controlplanev1alpha1.AddToScheme(s))
	utilruntime.Must(operatorv1alpha1.AddToScheme(s))
	utilruntime.Must(podcertv1alpha1.AddToScheme(s))
	utilruntime.Must(tenginev1.AddToScheme(s))
	utilruntime.Must(tenginev1alpha1.AddToScheme(s))
	return s
}
