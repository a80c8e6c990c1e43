{{- define "trustplane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "trustplane.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "trustplane.labels" -}}
{{ include "trustplane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "trustplane.serviceAccountName" -}}
{{- default (printf "%s-manager" (include "trustplane.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Labels of the agents: like the manager's, with their own component. */}}
{{- define "trustplane.agentSelectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "trustplane.agentLabels" -}}
{{ include "trustplane.agentSelectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The rules of a generated role in files/ (make manifests copies them there). */}}
{{- define "trustplane.generatedRules" -}}
{{- $role := .root.Files.Get .file | fromYaml -}}
{{- if not $role.rules }}{{ fail (printf "%s has no rules: run make manifests" .file) }}{{ end -}}
{{ toYaml $role.rules }}
{{- end -}}
