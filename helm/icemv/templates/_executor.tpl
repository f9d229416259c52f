{{/*
The executor pod template for Spark on Kubernetes (rendered into the ConfigMap and read by
the driver). Spark adds the image, the `executor` argument, its environment, resources and
owner reference to the driver pod; this gives the command of this image
(/usr/local/bin/spark-executor), the icemv pod's security context, and writable emptyDirs for
/tmp and the working directory under a read-only root file system. Executors never call the
Kubernetes API, so no token is mounted. The labels are not the Deployment's selector labels:
executors must not count as icemv pods (Service, PodDisruptionBudget).
*/}}
{{- define "icemv.executorPodTemplate" -}}
{{- $executor := .Values.sparkOnKubernetes.executor -}}
apiVersion: v1
kind: Pod
metadata:
  labels:
    {{- include "icemv.executorLabels" . | nindent 4 }}
spec:
  automountServiceAccountToken: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: {{ include "icemv.executorContainerName" . }}
      command:
        - /usr/local/bin/spark-executor
      env:
        # Bind and advertise the pod IP, not the image's loopback default.
        - name: SPARK_LOCAL_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.extraEnvFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        - name: work
          mountPath: /var/lib/icemv
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: tmp
      emptyDir:
        {{- with $executor.tmpSizeLimit }}
        sizeLimit: {{ . }}
        {{- end }}
    - name: work
      emptyDir:
        {{- with $executor.workSizeLimit }}
        sizeLimit: {{ . }}
        {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $executor.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $executor.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
