#!/usr/bin/env bash
# Generates the RBAC of each trustplane process from its own +kubebuilder:rbac markers, so no
# process is granted another's rights. Usage: hack/gen-rbac.sh CONTROLLER_GEN [OUT_ROOT]
# (OUT_ROOT defaults to the repository; the install test writes to a temporary copy).
set -euo pipefail
gen=$1
out=${2:-.}
mkdir -p "$out/config/rbac" "$out/config/node-agent" "$out/config/jwks-server" "$out/config/jwt-signer" "$out/config/components/dataplane-sidecar" "$out/charts/trustplane/files"
# The manager: its controllers (in every wing, not the wings' agents) and its own
# permissions (leader election, events, metrics auth).
controllers=(jwks aggregation/clusterroleaggregation aggregation/roleaggregation checksum/secretchecksum
  podcert/podcertsigner podcert/tlsexpiry provisioning/cluster provisioning/kubeconfig provisioning/subscription manager)
"$gen" rbac:roleName=trustplane-manager "${controllers[@]/#/paths=./internal/}" \
  output:rbac:artifacts:config="$out/config/rbac"
# The node agent: a ClusterRole (it follows the pods of its node in every namespace).
"$gen" rbac:roleName=trustplane-node-agent paths=./internal/podcert/nodeagent/... \
  output:rbac:artifacts:config="$out/config/node-agent"
# The JWKS server run alone (trustplane jwks-server): a ClusterRole that only reads.
"$gen" rbac:roleName=trustplane-jwks-server paths=./internal/jwks/jwksserver/... \
  output:rbac:artifacts:config="$out/config/jwks-server"
# The data-plane agent: a Role in the gateway's namespace. The markers need a namespace; it
# is dropped so that kustomize or Helm put the Role where the gateway runs.
"$gen" rbac:roleName=trustplane-dataplane paths=./internal/checksum/dataplaneagent/... output:rbac:stdout |
  sed '/^  namespace: gateway$/d' > "$out/config/components/dataplane-sidecar/role.yaml"
# kube-apiserver's external JWT signer (trustplane jwt-signer): a Role in its JWKSConfig's
# namespace, whose placeholder namespace is dropped likewise.
"$gen" rbac:roleName=trustplane-jwt-signer paths=./internal/jwks/jwtsigner/... output:rbac:stdout |
  sed '/^  namespace: jwt-signer$/d' > "$out/config/jwt-signer/role.yaml"
# The chart reads the agents' rules from copies inside the chart.
cp "$out/config/node-agent/role.yaml" "$out/charts/trustplane/files/node-agent-role.yaml"
cp "$out/config/jwks-server/role.yaml" "$out/charts/trustplane/files/jwks-server-role.yaml"
cp "$out/config/jwt-signer/role.yaml" "$out/charts/trustplane/files/jwt-signer-role.yaml"
cp "$out/config/components/dataplane-sidecar/role.yaml" "$out/charts/trustplane/files/dataplane-role.yaml"
# The admission policy that makes Role aggregation safe (config/policy) is not RBAC, but the
# chart ships the same file: a copy inside the chart, like the agents' rules.
cp config/policy/role-aggregation.yaml "$out/charts/trustplane/files/role-aggregation-policy.yaml"
# So is the policy that keeps the status of trustplane's kinds the manager's to write.
cp config/policy/status-writers.yaml "$out/charts/trustplane/files/status-writers-policy.yaml"
# And the one that lets only the manager remove its finalizers.
cp config/policy/finalizers.yaml "$out/charts/trustplane/files/finalizers-policy.yaml"
# And the one that keeps the JWKS controller's owner label the manager's.
cp config/policy/owner-labels.yaml "$out/charts/trustplane/files/owner-labels-policy.yaml"
# And the one that writes a new KubeconfigRequest's finalizer and the record of its Cluster.
cp config/policy/kubeconfig-requests.yaml "$out/charts/trustplane/files/kubeconfig-requests-policy.yaml"
# And the one that keeps a Cluster's Kubernetes version within the garden's (its binding
# names the manager's namespace: the chart puts in the release's).
cp config/policy/cluster-versions.yaml "$out/charts/trustplane/files/cluster-versions-policy.yaml"
# And the one that keeps a PodIdentityPolicy to names of its own namespace.
cp config/policy/pod-identity-policies.yaml "$out/charts/trustplane/files/pod-identity-policies-policy.yaml"
# So is the policy that keeps the node agent's requests to its own node (config/node-agent).
cp config/node-agent/pod-certificate-requests-policy.yaml "$out/charts/trustplane/files/node-agent-policy.yaml"
