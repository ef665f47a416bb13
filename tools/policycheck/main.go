// Command descheduler-policycheck loads a DeschedulerPolicy file with the descheduler's own
// types and scheme, but strictly: a key the v1alpha2 types do not have is an error, where the
// descheduler itself drops it without a word (its policy decoder is not strict; only plugin
// arguments are). On success it prints the policy as loaded, converted to the internal types
// and back to v1alpha2, as JSON, so a caller can compare it with what it wrote.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/descheduler/scheme"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: descheduler-policycheck <policy.yaml>")
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)
	external := &v1alpha2.DeschedulerPolicy{}
	if _, _, err := strict.UniversalDeserializer().Decode(data, nil, external); err != nil {
		fail("strict decoding: %v", err)
	}
	internal := &api.DeschedulerPolicy{}
	if err := scheme.Scheme.Convert(external, internal, nil); err != nil {
		fail("loading (plugin arguments are decoded strictly here): %v", err)
	}
	loaded := &v1alpha2.DeschedulerPolicy{}
	if err := scheme.Scheme.Convert(internal, loaded, nil); err != nil {
		fail("converting back: %v", err)
	}
	out, err := json.Marshal(loaded)
	if err != nil {
		fail("encoding: %v", err)
	}
	fmt.Println(string(out))
}
