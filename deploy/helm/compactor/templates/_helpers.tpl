{{/*
Labels of every object the chart renders: those of deploy/ (name, component) plus Helm's.
Selectors and Pod template labels stay those of deploy/, so the two installs select alike.
*/}}
{{- define "compactor.labels" -}}
app.kubernetes.io/name: compactor
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "compactor.selector" -}}
app.kubernetes.io/name: compactor
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* The image of both components: repository@digest, else repository:tag (appVersion). */}}
{{- define "compactor.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
The release namespace, any one: the components read theirs from the downward API and protect it
as kube-system (the webhook skips its Pods, the descheduler never evicts from it).
*/}}
{{- define "compactor.namespace" -}}
{{ .Release.Namespace }}
{{- end }}

{{/* Scheduling of one component's Pods: nodeSelector, tolerations, affinity, priority. */}}
{{- define "compactor.placement" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "compactor.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The restricted Pod Security profile, as in deploy/. */}}
{{- define "compactor.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- end }}

{{- define "compactor.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities: {drop: [ALL]}
  seccompProfile: {type: RuntimeDefault}
{{- end }}

{{/*
The policy scan's (checkov's) findings on a component's Deployment that are by design, as the
annotations checkov reads, each with why (docs/install.md lists them): .always, then those the
values leave (no NetworkPolicy, no CPU limit, a pull policy other than Always, no digest).
*/}}
{{- define "compactor.scanSkips" -}}
{{- $skips := .always }}
{{- if not .root.Values.networkPolicy.enabled }}
{{- $skips = append $skips "CKV2_K8S_6=networkPolicy.enabled is false: no NetworkPolicy of the chart selects its Pods" }}
{{- end }}
{{- if not (dig "limits" "cpu" "" .resources) }}
{{- $skips = append $skips .cpu }}
{{- end }}
{{- $pull := .root.Values.image.pullPolicy }}
{{- if ne $pull "Always" }}
{{- $skips = append $skips (printf "CKV_K8S_15=%s: the image is a fixed tag or a digest, and Always makes every start depend on the registry" $pull) }}
{{- end }}
{{- if not .root.Values.image.digest }}
{{- $skips = append $skips "CKV_K8S_43=no image of Compactor's is published, so none has a digest to pin here: pin the one you build (docs/install.md)" }}
{{- end -}}
annotations:
  {{- range $i, $s := $skips }}
  checkov.io/skip{{ add1 $i }}: {{ $s | quote }}
  {{- end }}
{{- end }}

{{/*
The ServiceAccount token, as deploy/ mounts it instead of the kubelet's (automountServiceAccountToken
false): projected where the kubelet would put it, valid for an hour, for the API server's audience,
bound to the Pod.
*/}}
{{- define "compactor.apiAccessMount" -}}
- {name: api-access, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}
{{- end }}

{{- define "compactor.apiAccessVolume" -}}
- name: api-access
  projected:
    sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3600}
      - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}
      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}
{{- end }}

{{- define "compactor.spread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "compactor.selector" . | nindent 8 }}
{{- end }}

{{/*
Extra env entries as given, but a plain value always as a string (--set turns 60 into a
number, which the API server would refuse in an EnvVar).
*/}}
{{- define "compactor.extraEnv" -}}
{{- range . }}
{{- if hasKey . "value" }}
- name: {{ .name }}
  value: {{ .value | toString | quote }}
{{- else }}
- {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}
