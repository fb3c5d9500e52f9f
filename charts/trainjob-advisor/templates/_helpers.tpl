{{/* The release's full name: the release name alone when it already contains the chart's. */}}
{{- define "trainjob-advisor.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "trainjob-advisor.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "trainjob-advisor.labels" -}}
{{ include "trainjob-advisor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "trainjob-advisor.serviceAccountName" -}}
{{- default (include "trainjob-advisor.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The leader Lease's name (leaderElection.id, else the release's full name), and the ConfigMap of
     runtime evidence kept beside it (advisor/controller/evidence.py evidence_name). */}}
{{- define "trainjob-advisor.leaseName" -}}
{{- .Values.leaderElection.id | default (include "trainjob-advisor.fullname" .) -}}
{{- end -}}

{{/* The release's save-window AdmissionCheck (kueue.saveWindowCheck): its name, and the controllerName
     its controller answers to. Each release has its own, so that namespace shards (releases with
     their own watchNamespaces) install side by side and each answers only the check that the
     ClusterQueues of its namespaces list. The check named trainjob-advisor-save-window (the release
     named trainjob-advisor's, or kueue.saveWindowCheckName's) keeps the controllerName of earlier
     versions (Kueue refuses a change of an AdmissionCheck's controllerName). */}}
{{- define "trainjob-advisor.saveWindowCheckName" -}}
{{- .Values.kueue.saveWindowCheckName | default (printf "%s-save-window" (include "trainjob-advisor.fullname" .)) -}}
{{- end -}}

{{- define "trainjob-advisor.saveWindowControllerName" -}}
{{- $name := include "trainjob-advisor.saveWindowCheckName" . -}}
{{- if eq $name "trainjob-advisor-save-window" -}}
trainjob-advisor.io/save-window
{{- else -}}
{{- printf "trainjob-advisor.io/%s" $name -}}
{{- end -}}
{{- end -}}
