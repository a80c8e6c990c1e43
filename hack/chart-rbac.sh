#!/usr/bin/env bash
# Turns the generated ClusterRole (config/rbac/role.yaml) into the Helm chart's template,
# so the chart's rules are generated from the same +kubebuilder:rbac markers.
set -euo pipefail
echo "# Generated from config/rbac/role.yaml by hack/chart-rbac.sh (make manifests). Do not edit."
sed -e '/^---$/d' \
    -e 's/^  name: trustplane-manager$/  name: {{ include "trustplane.fullname" . }}-manager\n  labels:\n    {{- include "trustplane.labels" . | nindent 4 }}/' \
    "$1"
