{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "blackboard-mcp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless it already holds it. */}}
{{- define "blackboard-mcp.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "blackboard-mcp.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "blackboard-mcp.labels" -}}
helm.sh/chart: {{ include "blackboard-mcp.chart" . }}
{{ include "blackboard-mcp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of the gateway pods. */}}
{{- define "blackboard-mcp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "blackboard-mcp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{/* Selector labels of the optional in-cluster Redis Stack pod. */}}
{{- define "blackboard-mcp.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "blackboard-mcp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{/* Selector labels of the optional in-cluster Redis Cluster pods. */}}
{{- define "blackboard-mcp.redisClusterSelectorLabels" -}}
app.kubernetes.io/name: {{ include "blackboard-mcp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis-cluster
{{- end }}

{{- define "blackboard-mcp.redisClusterName" -}}
{{- printf "%s-redis-cluster" (include "blackboard-mcp.fullname" .) | trunc 50 | trimSuffix "-" }}
{{- end }}

{{- define "blackboard-mcp.redisName" -}}
{{- printf "%s-redis" (include "blackboard-mcp.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret holding the signing key and the Redis URL. */}}
{{- define "blackboard-mcp.secretName" -}}
{{- default (include "blackboard-mcp.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* The Redis URL the chart writes into its Secret. Empty when existingSecret holds it. A
chart that rendered with no Redis of its own would deploy gateways that crash-loop on their
readiness probe, so a missing URL fails the render instead, naming the three ways to give one. */}}
{{- define "blackboard-mcp.redisUrl" -}}
{{- if .Values.redisCluster.enabled }}
{{- $name := include "blackboard-mcp.redisClusterName" . }}
{{- printf "redis://:%s@%s-0.%s.%s.svc:6379/0" (include "blackboard-mcp.redisPassword" . | urlquery) $name $name .Release.Namespace }}
{{- else if .Values.redisStack.enabled }}
{{- printf "redis://%s:6379/0" (include "blackboard-mcp.redisName" .) }}
{{- else if .Values.redis.url }}
{{- .Values.redis.url }}
{{- else if not .Values.existingSecret }}
{{- fail "redis.url is not set: give the URL of a Redis with the query engine (--set redis.url=redis://host:6379/0), or set existingSecret to a Secret holding it, or set redisStack.enabled=true for an in-cluster one" }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the gateway pods run as. */}}
{{- define "blackboard-mcp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "blackboard-mcp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "blackboard-mcp.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Whether this render can see the cluster. `lookup` answers from the cluster under `helm install`
and `helm upgrade`, and with nothing at all in an offline render (`helm template`, Argo CD,
Flux). A value the chart generates is kept across upgrades by reading it back from the
release's Secret, which an offline render cannot do: there a generated value would be new on
every render, so the chart refuses to generate one. Every namespace holds the ConfigMap
kube-root-ca.crt (Kubernetes 1.21+), so finding it means the cluster answered.
*/}}
{{- define "blackboard-mcp.clusterVisible" -}}
{{- if lookup "v1" "ConfigMap" .Release.Namespace "kube-root-ca.crt" }}true{{- end }}
{{- end }}

{{/* A value to generate: refused where the render cannot keep it (see clusterVisible). */}}
{{- define "blackboard-mcp.generated" -}}
{{- if not (include "blackboard-mcp.clusterVisible" .root) }}
{{- fail (printf "this render cannot see the cluster (helm template, Argo CD, Flux), so a generated %s would change on every render and void what depends on it: set %s, or existingSecret (see the chart's README, \"GitOps\")" .what .value) }}
{{- end }}
{{- randAlphaNum .length }}
{{- end }}

{{/* The in-cluster Redis Cluster's password: given, kept from the last release, or new. */}}
{{- define "blackboard-mcp.redisPassword" -}}
{{- $password := .Values.redisCluster.password }}
{{- if not $password }}
{{- $previous := lookup "v1" "Secret" .Release.Namespace (include "blackboard-mcp.fullname" .) }}
{{- if and $previous $previous.data }}
{{- $password = index $previous.data .Values.secretKeys.redisPassword | default "" | b64dec }}
{{- end }}
{{- end }}
{{- if not $password }}
{{- $password = include "blackboard-mcp.generated" (dict "root" . "what" "Redis Cluster password" "value" "redisCluster.password" "length" 48) }}
{{- end }}
{{- /* Remembered for this render: the Secret's password and the URL's must be one. */}}
{{- $_ := set .Values.redisCluster "password" $password }}
{{- $password }}
{{- end }}
