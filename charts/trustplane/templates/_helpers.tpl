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

{{/* The rules of a generated role in files/ (make manifests copies them there): of its
document of the given kind when a file holds several (the data plane's Role and
ClusterRole), else of its first. */}}
{{- define "trustplane.generatedRules" -}}
{{- $rules := list -}}
{{- range $doc := splitList "\n---\n" (printf "\n%s" ($.root.Files.Get $.file)) -}}
{{- $role := fromYaml $doc -}}
{{- if and $role.rules (not $rules) (or (not $.kind) (eq $role.kind $.kind)) }}{{ $rules = $role.rules }}{{ end -}}
{{- end -}}
{{- if not $rules }}{{ fail (printf "%s has no %s rules: run make manifests" .file (.kind | default "")) }}{{ end -}}
{{ toYaml $rules }}
{{- end -}}

{{/* One flag the chart passes for a convenience value (controllers, checksum, garden, ...),
unless the config value sets the same field itself: the file's field then applies (a flag
would override it). dict: "config" the config value, "section" ("" for an agent's
top-level fields), "field", "arg". */}}
{{- define "trustplane.arg" -}}
{{- $fields := .config | default dict -}}
{{- if .section }}{{ $fields = index $fields .section | default dict }}{{ end -}}
{{- if not (hasKey $fields .field) -}}
{{ printf "\n        - %s" (quote .arg) }}
{{- end -}}
{{- end -}}

{{/* A configuration file: apiVersion, kind, then the config value. */}}
{{- define "trustplane.configFile" -}}
apiVersion: config.trustplane.io/v1alpha1
kind: {{ .kind }}
{{- with .config }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The jwks-server's configuration: the issuer options it shares with the manager, from
config.jwks, then its own config (which wins). */}}
{{- define "trustplane.jwksServerConfig" -}}
{{- $shared := pick ((.Values.config | default dict).jwks | default dict) "issuerNamespaces" "issuerClaimNamespace" "maxCacheMaxAge" "serverHosts" "serverTrustedProxies" -}}
{{- $own := deepCopy (.Values.jwksServer.config | default dict) -}}
{{- $jwks := merge (deepCopy ($own.jwks | default dict)) $shared -}}
{{- if $jwks }}{{ $_ := set $own "jwks" $jwks }}{{ end -}}
{{ toYaml $own }}
{{- end -}}
