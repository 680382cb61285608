{{/* Names and labels. */}}
{{- define "prismlb-reconciler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "prismlb-reconciler.fullname" -}}
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

{{- define "prismlb-reconciler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "prismlb-reconciler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "prismlb-reconciler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "prismlb-reconciler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: reconciler
{{- end }}

{{- define "prismlb-reconciler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "prismlb-reconciler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The daemon's log level. */}}
{{- define "prismlb-reconciler.logLevel" -}}
{{- $l := lower .Values.logLevel }}
{{- if has $l (list "dpanic" "panic" "fatal") }}error{{ else }}{{ $l }}{{ end }}
{{- end }}

{{/* Secret holding the token file, or "" when the token comes from the environment. */}}
{{- define "prismlb-reconciler.tokenSecret" -}}
{{- if .Values.hcloudToken.existingSecret }}{{ .Values.hcloudToken.existingSecret }}
{{- else if .Values.hcloudToken.value }}{{ include "prismlb-reconciler.fullname" . }}
{{- end }}
{{- end }}

{{/* 1 when the chart makes a Secret (token value, or a ROBOTLB_HCLOUD_TOKEN in envs). */}}
{{- define "prismlb-reconciler.makeSecret" -}}
{{- if or (and .Values.hcloudToken.value (not .Values.hcloudToken.existingSecret)) (hasKey (.Values.envs | default dict) "ROBOTLB_HCLOUD_TOKEN") }}1{{ end }}
{{- end }}

{{/* Fails an install or upgrade that gives the reconciler no API token. */}}
{{- define "prismlb-reconciler.requireToken" -}}
{{- if and (or .Release.IsInstall .Release.IsUpgrade) (not (include "prismlb-reconciler.tokenSecret" .)) (not (hasKey (.Values.envs | default dict) "ROBOTLB_HCLOUD_TOKEN")) (not .Values.existingSecrets) }}
{{- fail "no Hetzner Cloud API token: set hcloudToken.value, hcloudToken.existingSecret, envs.ROBOTLB_HCLOUD_TOKEN, or existingSecrets naming a Secret with ROBOTLB_HCLOUD_TOKEN" }}
{{- end }}
{{- end }}

{{- define "prismlb-reconciler.config" -}}
# prismlb, reconciler role, rendered by the prismlb-reconciler chart.
log_level = {{ include "prismlb-reconciler.logLevel" . | toJson }};
log_format = {{ .Values.logFormat | toJson }};
shutdown_grace = {{ .Values.shutdownGrace | toJson }};

instances = (
  { module = "leader"; name = "leader";
    lease_namespace = {{ .Release.Namespace | toJson }}; lease_name = {{ .Values.leader.leaseName | toJson }};
    lease_duration = {{ .Values.leader.leaseDuration | toJson }}; renew_deadline = {{ .Values.leader.renewDeadline | toJson }};
    retry_period = {{ .Values.leader.retryPeriod | toJson }}; release_on_cancel = {{ .Values.leader.releaseOnCancel }}; },

  { module = "hetzner_lb"; name = "hetzner"; gate = "leader";
    {{- if include "prismlb-reconciler.tokenSecret" . }}
    hcloud_token_file = "/var/run/secrets/hcloud/token";
    {{- end }}
    hcloud_endpoint = {{ .Values.hetzner.endpoint | toJson }};
    refused_recheck_interval = {{ .Values.hetzner.refusedRecheckInterval | toJson }};
    resync_budget_percent = {{ int .Values.hetzner.resyncBudgetPercent }};
    dry_run = {{ .Values.hetzner.dryRun }}; },

  { module = "metrics"; name = "metrics"; bind_address = "0.0.0.0"; port = {{ int .Values.healthPort }}; }
);
{{- end }}
