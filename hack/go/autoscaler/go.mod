// Wrapper module: builds cluster-autoscaler (k8s.io/autoscaler/cluster-autoscaler, master of
// 2025-06-13, Kubernetes 1.33 libraries) with only its kwok cloud provider (build tag kwok).
// k8s.io/kubernetes v1.33.1 is a dependency; its staging modules are replaced by v0.33.1.
module graceguard.local/hack/autoscaler

go 1.26.0

require (
	k8s.io/autoscaler/cluster-autoscaler v0.0.0-20250613073258-1959f5f61f6c
	k8s.io/kubernetes v1.33.1
)

tool k8s.io/autoscaler/cluster-autoscaler

replace (
	k8s.io/api => k8s.io/api v0.33.1
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.33.1
	k8s.io/apimachinery => k8s.io/apimachinery v0.33.1
	k8s.io/apiserver => k8s.io/apiserver v0.33.1
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.33.1
	k8s.io/client-go => k8s.io/client-go v0.33.1
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.33.1
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.33.1
	k8s.io/code-generator => k8s.io/code-generator v0.33.1
	k8s.io/component-base => k8s.io/component-base v0.33.1
	k8s.io/component-helpers => k8s.io/component-helpers v0.33.1
	k8s.io/controller-manager => k8s.io/controller-manager v0.33.1
	k8s.io/cri-api => k8s.io/cri-api v0.33.1
	k8s.io/cri-client => k8s.io/cri-client v0.33.1
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.33.1
	k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.33.1
	k8s.io/endpointslice => k8s.io/endpointslice v0.33.1
	k8s.io/externaljwt => k8s.io/externaljwt v0.33.1
	k8s.io/kms => k8s.io/kms v0.33.1
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.33.1
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.33.1
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.33.1
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.33.1
	k8s.io/kubectl => k8s.io/kubectl v0.33.1
	k8s.io/kubelet => k8s.io/kubelet v0.33.1
	k8s.io/metrics => k8s.io/metrics v0.33.1
	k8s.io/mount-utils => k8s.io/mount-utils v0.33.1
	k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.33.1
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.33.1
	k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.33.1
	k8s.io/sample-controller => k8s.io/sample-controller v0.33.1
)
