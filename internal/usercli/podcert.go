package usercli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
)

func newPodcertCommand() *cobra.Command {
	return day2Group("podcert", "Pod certificates: why a pod has (or has no) certificate", newPodcertInspectCommand())
}

func newPodcertInspectCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect POD",
		Short: "Show each podCertificate projection of a pod: its state, requests, notAfter, beginRefreshAt and the warnings issued",
		Long: `Show each podCertificate projection of a pod as the node agent's manager has it, from
the pod's PodCertificateRequests: those of its projected volumes, and for a pod opted in
by the annotation ` + certificates.SignerAnnotation + ` (and ` + certificates.KeyTypeAnnotation + `)
the one trustplane's node agent serves without a volume. For each, its state (fresh,
overdue_for_refresh, expired, not_yet_issued, denied, failed; unknown when its requests
were garbage-collected), the requests with their outcome, the served certificate's
notAfter and beginRefreshAt, and the Warning events issued about the pod
(CertificateOverdueForRefresh, CertificateExpired, UnknownSigner, InvalidProjection,
Denied, Failed, ...).`,
		Example: examples("podcert inspect web-0 -n apps"),
		Args:    cobra.ExactArgs(1),
	}
	f := newClientFlags(cmd, false, true)
	cmd.ValidArgsFunction = completePods(f)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, ns, err := f.connect(errOut(cmd))
		if err != nil {
			return err
		}
		now := time.Now()
		pod, reports, err := inspectPod(cmd.Context(), c, ns, args[0], now)
		if err != nil {
			return err
		}
		tree := &node{Text: fmt.Sprintf("Pod %s/%s  node %s, ServiceAccount %s", ns, pod.Name, orNone(pod.Spec.NodeName), pod.Spec.ServiceAccountName)}
		tree.adopt(projectionNodes(reports, now)...)
		tree.adopt(warningsNode(cmd.Context(), c, pod, now))
		return renderTree(out(cmd), tree)
	}
	return cmd
}

// warningsNode lists the Warning events about the pod: the node agent's and the signer's.
func warningsNode(ctx context.Context, c client.Client, pod *corev1.Pod, now time.Time) *node {
	list := &corev1.EventList{}
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)), fields.OneTermEqualSelector("type", corev1.EventTypeWarning))
	if err := c.List(ctx, list, client.InNamespace(pod.Namespace), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return &node{Text: "Warnings: cannot be read: " + oneLine(err).Error()}
	}
	n := eventsNode(list.Items, now)
	if len(list.Items) == 0 {
		n.Text = "Warnings: none"
	} else {
		n.Text = "Warnings" + n.Text[len("Events"):]
	}
	return n
}
