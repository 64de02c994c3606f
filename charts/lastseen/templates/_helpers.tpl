{{/*
The labels deploy/base's kustomization puts on every object and pod template.
*/}}
{{- define "lastseen.labels" -}}
app.kubernetes.io/name: lastseen
app.kubernetes.io/part-of: lastseen
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/*
One object from a file of deploy/base, as deploy/base's kustomization makes it: the common labels
added (also to a pod template), moved to the chosen namespace (its own and its RBAC subjects').
Takes (dict "root" $ "obj" $object "labels" true|false).
*/}}
{{- define "lastseen.object" -}}
{{- $root := .root -}}
{{- $obj := .obj -}}
{{- $ns := $root.Values.namespace.name -}}
{{- if .labels -}}
{{- $common := include "lastseen.labels" $root | fromYaml -}}
{{- $_ := set $obj.metadata "labels" (mergeOverwrite (deepCopy ($obj.metadata.labels | default dict)) $common) -}}
{{- if and $obj.spec (kindIs "map" $obj.spec) $obj.spec.template -}}
{{- $tm := $obj.spec.template.metadata | default dict -}}
{{- $_ := set $tm "labels" (mergeOverwrite (deepCopy ($tm.labels | default dict)) $common) -}}
{{- $_ := set $obj.spec.template "metadata" $tm -}}
{{- end -}}
{{- end -}}
{{- if $obj.metadata.namespace -}}
{{- $_ := set $obj.metadata "namespace" $ns -}}
{{- end -}}
{{- if eq $obj.kind "Namespace" -}}
{{- $_ := set $obj.metadata "name" $ns -}}
{{- end -}}
{{- range $obj.subjects | default list -}}
{{- if .namespace -}}
{{- $_ := set . "namespace" $ns -}}
{{- end -}}
{{- end -}}
{{ toYaml $obj }}
{{- end }}

{{/*
The objects of one YAML file (several documents), each through lastseen.object.
Takes (dict "root" $ "file" "files/base/x.yaml" "labels" true|false).
*/}}
{{- define "lastseen.file" -}}
{{- $root := .root -}}
{{- $labels := .labels -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($root.Files.Get .file) -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if $obj.kind }}
---
{{ include "lastseen.object" (dict "root" $root "obj" $obj "labels" $labels) }}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The agent's image: repository@digest when a digest is given, else repository:tag (default appVersion).
*/}}
{{- define "lastseen.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end }}
