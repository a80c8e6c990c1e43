package subscription

import (
	"errors"
	"fmt"
	"strings"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/credentialpool"
	"github.com/trustplane/trustplane/internal/status"
)

// exhausted says where the pool is, what a credential needs, and how to hand back a
// dirty one that would serve (docs/provisioning.md, "Releasing").
func (p *pool) exhausted(sr *cp.SubscriptionRequest, err error) string {
	resource := "secret"
	if p.gvk == CredentialsBindingGVK {
		resource = "credentialsbinding"
	}
	msg := fmt.Sprintf("%v, in the %ss of namespace %q", err, resource, p.namespaceFor(sr))
	var ex *credentialpool.ExhaustedError
	if errors.As(err, &ex) && len(ex.Dirty) > 0 {
		msg += fmt.Sprintf("; dirty, and would serve once its account is cleaned: %s (hand one back with `kubectl -n %s label %s %s dirty- tenantName-`)",
			strings.Join(ex.Dirty, ", "), p.namespaceFor(sr), resource, ex.Dirty[0])
	}
	return msg
}

func assigned(sr *cp.SubscriptionRequest, name string) {
	sr.Status.GardenerSecretName = name
	status.MarkReady(sr, cp.ReasonAssigned, "credential "+name)
}
