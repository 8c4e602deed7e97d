// pod-security evaluates the Pod Security Standards' "restricted" level, with the admission
// controller's own checks (k8s.io/pod-security-admission), on every pod and pod template in the
// YAML documents on stdin (a `helm template` render). It prints each finding and exits 1 on any.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

type object struct {
	Kind     string            `json:"kind"`
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Template    *corev1.PodTemplateSpec `json:"template"`
		JobTemplate *struct {
			Spec struct {
				Template *corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

func main() {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		fmt.Fprintln(os.Stderr, "pod-security:", err)
		os.Exit(2)
	}
	level := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	reader := yaml.NewYAMLReader(bufio.NewReader(os.Stdin))
	pods, findings := 0, 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pod-security: cannot read the input:", err)
			os.Exit(2)
		}
		var obj object
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			fmt.Fprintln(os.Stderr, "pod-security:", err)
			os.Exit(2)
		}
		var meta *metav1.ObjectMeta
		var spec *corev1.PodSpec
		switch {
		case obj.Kind == "Pod":
			var pod corev1.Pod
			if err := yaml.Unmarshal(doc, &pod); err != nil {
				fmt.Fprintln(os.Stderr, "pod-security:", err)
				os.Exit(2)
			}
			meta, spec = &pod.ObjectMeta, &pod.Spec
		case obj.Spec.Template != nil:
			meta, spec = &obj.Spec.Template.ObjectMeta, &obj.Spec.Template.Spec
		case obj.Spec.JobTemplate != nil && obj.Spec.JobTemplate.Spec.Template != nil:
			meta, spec = &obj.Spec.JobTemplate.Spec.Template.ObjectMeta, &obj.Spec.JobTemplate.Spec.Template.Spec
		default:
			continue
		}
		pods++
		result := policy.AggregateCheckResults(evaluator.EvaluatePod(level, meta, spec))
		if !result.Allowed {
			findings++
			fmt.Printf("%s/%s violates PodSecurity \"restricted:latest\": %s\n", obj.Kind, obj.Metadata.Name, result.ForbiddenDetail())
		}
	}
	fmt.Printf("pod-security: %d pod templates checked against \"restricted\", %d with findings\n", pods, findings)
	if pods == 0 || findings > 0 {
		os.Exit(1)
	}
}

