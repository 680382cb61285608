{{/* Names and labels. */}}
{{- define "prismlb-proxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "prismlb-proxy.fullname" -}}
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

{{- define "prismlb-proxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "prismlb-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "prismlb-proxy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "prismlb-proxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: proxy
{{- end }}

{{- define "prismlb-proxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "prismlb-proxy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The static endpoints as a list, from a comma-separated string or a list. */}}
{{- define "prismlb-proxy.endpoints" -}}
{{- $eps := list }}
{{- if kindIs "string" .Values.endpoints }}
{{- range splitList "," .Values.endpoints }}
{{- if trim . }}{{- $eps = append $eps (trim .) }}{{- end }}
{{- end }}
{{- else }}
{{- $eps = .Values.endpoints }}
{{- end }}
{{- if not $eps }}
{{- /* Installing into a cluster: the API servers it has now. */}}
{{- range (lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "").items }}
{{- if eq (index (.metadata.labels | default dict) "kubernetes.io/service-name") "kubernetes" }}
{{- $port := 443 }}
{{- range .ports }}{{ if eq (.name | default "") "https" }}{{ $port = int .port }}{{ end }}{{ end }}
{{- range .endpoints }}{{ range .addresses }}
{{- $eps = append $eps (ternary (printf "[%s]:%d" . $port) (printf "%s:%d" . $port) (contains ":" .)) }}
{{- end }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $eps }}
{{- if or .Release.IsInstall .Release.IsUpgrade }}
{{- fail "endpoints: give the control-plane endpoints (host:port), e.g. --set 'endpoints={10.0.0.1:6443,10.0.0.2:6443}'" }}
{{- end }}
{{- /* helm lint only: a documentation address (RFC 5737). */}}
{{- $eps = list "192.0.2.1:6443" }}
{{- end }}
{{- toJson $eps }}
{{- end }}

{{/* Address of the health server. */}}
{{- define "prismlb-proxy.healthAddress" -}}
{{- if .Values.healthBindAddress }}{{ .Values.healthBindAddress }}
{{- else if .Values.metrics.enabled }}0.0.0.0
{{- else }}{{ .Values.bindAddress }}
{{- end }}
{{- end }}

{{/* The daemon's log level from extractedprism's names. */}}
{{- define "prismlb-proxy.logLevel" -}}
{{- $l := lower .Values.logLevel }}
{{- if has $l (list "dpanic" "panic" "fatal") }}error{{ else }}{{ $l }}{{ end }}
{{- end }}

{{/* Discovery client URL: this node's own proxy. */}}
{{- define "prismlb-proxy.discoveryServer" -}}
{{- if .Values.discovery.server }}{{ .Values.discovery.server }}
{{- else }}
{{- $a := .Values.bindAddress }}
{{- if has $a (list "0.0.0.0" "::" "localhost") }}{{ $a = "127.0.0.1" }}{{ end }}
{{- if contains ":" $a }}{{ printf "https://[%s]:%d" $a (int .Values.bindPort) }}
{{- else }}{{ printf "https://%s:%d" $a (int .Values.bindPort) }}{{ end }}
{{- end }}
{{- end }}

{{/* The libconfig file. Strings go through toJson: a JSON string is a
     valid libconfig string. */}}
{{- define "prismlb-proxy.config" -}}
# prismlb, proxy role, rendered by the prismlb-proxy chart.
log_level = {{ include "prismlb-proxy.logLevel" . | toJson }};
log_format = {{ .Values.logFormat | toJson }};
shutdown_grace = {{ .Values.shutdownGrace | toJson }};

instances = (
  { module = "endpoint_watch"; name = "apiservers";
    endpoints = [ {{- range $i, $e := include "prismlb-proxy.endpoints" . | fromJsonArray }}{{ if $i }},{{ end }} {{ $e | toJson }}{{ end }} ];
    enable_discovery = {{ .Values.enableDiscovery }};
    server = {{ include "prismlb-proxy.discoveryServer" . | toJson }};
    tls_server_name = {{ .Values.discovery.tlsServerName | toJson }};
    namespace = {{ .Values.discovery.namespace | toJson }};
    service_name = {{ .Values.discovery.serviceName | toJson }};
    port_name = {{ .Values.discovery.portName | toJson }};
    {{- if and .Values.stateDir.enabled .Values.enableDiscovery }}
    state_file = {{ printf "%s/endpoints" .Values.stateDir.mountPath | toJson }};
    {{- end }} },

  { module = "tcp_proxy"; name = "kubeprism"; upstreams = [ "apiservers" ];
    bind_address = {{ .Values.bindAddress | toJson }}; bind_port = {{ int .Values.bindPort }};
    health_interval = {{ .Values.healthInterval | toJson }}; health_timeout = {{ .Values.healthTimeout | toJson }};
    drain_timeout = {{ .Values.drainTimeout | toJson }};
    {{- with .Values.upstreamSelection }}
    upstream_selection = {{ . | toJson }};
    {{- end }}
    health_check = {{ .Values.healthCheck | toJson }};
    {{- if eq .Values.healthCheck "readyz" }}
    health_check_ca_file = {{ .Values.healthCheckCaFile | toJson }};
    {{- if .Values.kubeletClientCert.enabled }}
    health_check_cert_file = {{ printf "%s/%s" .Values.kubeletClientCert.mountPath .Values.kubeletClientCert.file | toJson }};
    health_check_key_file = {{ printf "%s/%s" .Values.kubeletClientCert.mountPath .Values.kubeletClientCert.file | toJson }};
    {{- else if .Values.healthCheckCertFile }}
    health_check_cert_file = {{ .Values.healthCheckCertFile | toJson }};
    health_check_key_file = {{ .Values.healthCheckKeyFile | toJson }};
    {{- end }}
    {{- with .Values.healthCheckTokenFile }}
    health_check_token_file = {{ . | toJson }};
    {{- end }}
    {{- end }}
    health_check_server_name = {{ .Values.healthCheckServerName | toJson }}; },

  { module = "metrics"; name = "metrics";
    bind_address = {{ include "prismlb-proxy.healthAddress" . | toJson }}; port = {{ int .Values.healthPort }};
    liveness_interval = {{ .Values.livenessInterval | toJson }}; liveness_threshold = {{ .Values.livenessThreshold | toJson }}; }
);
{{- end }}
