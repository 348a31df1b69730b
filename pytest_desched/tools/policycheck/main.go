// Command policycheck decodes, converts, defaults and validates DeschedulerPolicy documents with
// the descheduler's own packages (the module version this binary is built against), so the
// runbook's checks say exactly what that descheduler would say at start-up.
//
// Protocol: one JSON object per stdin line, {"id": "...", "policy": "<YAML or JSON text>"};
// one JSON result per stdout line, in order. `policycheck version` prints the version.
//
// Each result has two passes:
//   - the descheduler's path: descheduler.LoadPolicyConfig (non-strict top-level decode,
//     strict plugin-args decode, validation, defaults), then the start-up checks of
//     newDescheduler (nodeSelector parse, frameworkprofile.NewProfile per profile);
//   - a strict decode of the same bytes into the same Go types, listing every field the
//     descheduler silently drops, with its path.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	"sigs.k8s.io/descheduler/pkg/descheduler/scheme"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
	"sigs.k8s.io/descheduler/pkg/version"
)

type request struct {
	ID     string `json:"id"`
	Policy string `json:"policy"`
}

type droppedField struct {
	Path    string   `json:"path"`
	Kind    string   `json:"kind"` // "unknown" or "duplicate"
	Message string   `json:"message"`
	Known   []string `json:"known"` // the json field names valid where this one was written
}

type result struct {
	ID       string          `json:"id"`
	Accepted bool            `json:"accepted"`
	Stage    string          `json:"stage,omitempty"` // decode, validate, startup
	Error    string          `json:"error,omitempty"`
	Dropped  []droppedField  `json:"dropped"`
	Strict   string          `json:"strict_error,omitempty"` // a strict-pass error that is not a field list
	Enabled  int             `json:"enabled_plugins"`
	Profiles int             `json:"profiles"`
	Effect   json.RawMessage `json:"effective,omitempty"`
}

var fieldRe = regexp.MustCompile(`^(unknown|duplicate) field "(.*)"$`)

type checker struct {
	dir    string
	strict runtime.Decoder
}

func newChecker() (*checker, error) {
	dir, err := os.MkdirTemp("", "policycheck-")
	if err != nil {
		return nil, err
	}
	// The same scheme the descheduler decodes with, with strict field checking switched on;
	// no conversion, so plugin args (checked by argsPass) cannot hide top-level findings.
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).
		UniversalDeserializer()
	return &checker{dir: dir, strict: strict}, nil
}

func (c *checker) check(req request, n int) result {
	res := result{ID: req.ID, Dropped: []droppedField{}}
	res.Dropped, res.Strict = c.strictPass([]byte(req.Policy))
	res.Dropped = append(res.Dropped, argsPass([]byte(req.Policy))...)

	// LoadPolicyConfig reads a file, as the descheduler does with --policy-config-file.
	path := filepath.Join(c.dir, fmt.Sprintf("policy-%d.yaml", n))
	if err := os.WriteFile(path, []byte(req.Policy), 0o600); err != nil {
		res.Stage, res.Error = "io", err.Error()
		return res
	}
	defer os.Remove(path)
	name := req.ID
	if name == "" {
		name = "policy.yaml"
	}
	client := fake.NewSimpleClientset()
	policy, err := descheduler.LoadPolicyConfig(path, client, pluginregistry.PluginRegistry)
	if err != nil {
		res.Error = strings.ReplaceAll(err.Error(), path, name)
		res.Stage = "validate"
		if strings.HasPrefix(err.Error(), "failed decoding") {
			res.Stage = "decode"
		}
		return res
	}
	res.Profiles = len(policy.Profiles)
	for _, p := range policy.Profiles {
		res.Enabled += len(p.Plugins.Deschedule.Enabled) + len(p.Plugins.Balance.Enabled)
	}
	res.Effect = effective(policy)
	if err := startup(policy, client); err != nil {
		res.Stage, res.Error = "startup", err.Error()
		return res
	}
	res.Accepted = true
	return res
}

// strictPass decodes with unknown/duplicate field detection: what the lenient decoder drops.
func (c *checker) strictPass(data []byte) ([]droppedField, string) {
	out := []droppedField{}
	_, _, err := c.strict.Decode(data, nil, &v1alpha2.DeschedulerPolicy{})
	if err == nil {
		return out, ""
	}
	strictErr, ok := runtime.AsStrictDecodingError(err)
	if !ok {
		return out, err.Error()
	}
	return fieldErrors(strictErr.Errors(), "", reflect.TypeOf(v1alpha2.DeschedulerPolicy{})), ""
}

// fieldErrors turns strict decoding errors into fields with paths under prefix, each with the
// field names its parent Go type (root, walked along the path) accepts.
func fieldErrors(errs []error, prefix string, root reflect.Type) []droppedField {
	out := []droppedField{}
	for _, e := range errs {
		m := fieldRe.FindStringSubmatch(e.Error())
		if m == nil {
			out = append(out, droppedField{Kind: "unknown", Message: e.Error(), Known: []string{}})
			continue
		}
		out = append(out, droppedField{
			Path: prefix + m[2], Kind: m[1], Message: e.Error(), Known: knownAt(root, m[2]),
		})
	}
	return out
}

var tokenRe = regexp.MustCompile(`[^.\[\]]+|\[\d+\]`)

// knownAt walks t along path's parent and lists the json names of the struct found there.
func knownAt(t reflect.Type, path string) []string {
	tokens := tokenRe.FindAllString(path, -1)
	for _, tok := range tokens[:max(len(tokens)-1, 0)] {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case strings.HasPrefix(tok, "["):
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return []string{}
			}
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := jsonField(t, tok)
			if !ok {
				return []string{}
			}
			t = f
		default:
			return []string{}
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return []string{}
	}
	return jsonNames(t)
}

func jsonName(f reflect.StructField) (string, bool) {
	tag := strings.Split(f.Tag.Get("json"), ",")
	if tag[0] == "-" {
		return "", false
	}
	if tag[0] == "" && f.Anonymous {
		return "", true // inlined
	}
	if tag[0] == "" {
		return f.Name, false
	}
	return tag[0], false
}

func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		n, inline := jsonName(f)
		if inline {
			if ft, ok := jsonField(f.Type, name); ok {
				return ft, true
			}
			continue
		}
		if n == name {
			return f.Type, true
		}
	}
	return nil, false
}

func jsonNames(t reflect.Type) []string {
	out := []string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		n, inline := jsonName(f)
		if inline {
			out = append(out, jsonNames(f.Type)...)
		} else if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// argsPass strict-decodes each pluginConfig's args into the registered args type with the
// decoder v1alpha2's conversion uses, to give each unknown args field its full path.
func argsPass(data []byte) []droppedField {
	out := []droppedField{}
	raw := &v1alpha2.DeschedulerPolicy{}
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil || json.Unmarshal(jsonData, raw) != nil {
		return out
	}
	for i, prof := range raw.Profiles {
		for j, pc := range prof.PluginConfigs {
			util, ok := pluginregistry.PluginRegistry[pc.Name]
			if !ok || pc.Args.Raw == nil {
				continue
			}
			obj := util.PluginArgInstance.DeepCopyObject()
			_, _, err := v1alpha2.Codecs.UniversalDecoder().Decode(pc.Args.Raw, nil, obj)
			strictErr, ok := runtime.AsStrictDecodingError(err)
			if err == nil || !ok {
				continue
			}
			prefix := fmt.Sprintf("profiles[%d].pluginConfig[%d].args.", i, j)
			out = append(out, fieldErrors(strictErr.Errors(), prefix, reflect.TypeOf(obj).Elem())...)
		}
	}
	return out
}

// startup runs what newDescheduler does with a loaded policy before its first cycle:
// parse the nodeSelector and build every profile (frameworkprofile.NewProfile), which is
// where an enabled plugin that is not registered, or has no pluginConfig, fails.
func startup(policy *api.DeschedulerPolicy, client *fake.Clientset) error {
	if policy.NodeSelector != nil {
		if _, err := labels.Parse(*policy.NodeSelector); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	evictor, err := evictions.NewPodEvictor(ctx, client, events.NewFakeRecorder(100), podInformer,
		features.DefaultMutableFeatureGate, evictions.NewOptions())
	if err != nil {
		return err
	}
	for idx, profile := range policy.Profiles {
		_, err := frameworkprofile.NewProfile(ctx, profile, pluginregistry.PluginRegistry,
			frameworkprofile.WithClientSet(client),
			frameworkprofile.WithSharedInformerFactory(factory),
			frameworkprofile.WithPodEvictor(evictor),
			frameworkprofile.WithProfileInstanceID(fmt.Sprintf("%d", idx)),
		)
		if err != nil {
			// The descheduler's own wording (pkg/descheduler/descheduler.go newDescheduler).
			return fmt.Errorf("unable to create %q profile: %v", profile.Name, err)
		}
	}
	return nil
}

// effective is the loaded (converted, defaulted) policy in its v1alpha2 form.
func effective(policy *api.DeschedulerPolicy) json.RawMessage {
	// v0.36.0's external conversion of typed plugin args goes through a scheme that does not
	// know them, so convert the policy without args and put each typed args object back
	// (a RawExtension marshals its Object with the args type's own json tags).
	in := policy.DeepCopy()
	args := map[[2]int]runtime.Object{}
	for i := range in.Profiles {
		for j := range in.Profiles[i].PluginConfigs {
			args[[2]int{i, j}] = in.Profiles[i].PluginConfigs[j].Args
			in.Profiles[i].PluginConfigs[j].Args = nil
		}
	}
	ext := &v1alpha2.DeschedulerPolicy{}
	err := scheme.Scheme.Convert(in, ext, nil)
	for k, a := range args {
		if err == nil && a != nil {
			ext.Profiles[k[0]].PluginConfigs[k[1]].Args = runtime.RawExtension{Object: a}
		}
	}
	if err != nil {
		b, _ := json.Marshal(map[string]string{"conversionError": err.Error()})
		return b
	}
	ext.APIVersion = v1alpha2.SchemeGroupVersion.String()
	ext.Kind = "DeschedulerPolicy"
	b, err := json.Marshal(ext)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"marshalError": err.Error()})
	}
	return b
}

func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Printf("policycheck GitVersion:%q\n", version.Get().GitVersion)
		return
	}
	quietKlog()
	descheduler.SetupPlugins() // as cmd/descheduler does before loading the policy
	c, err := newChecker()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer os.RemoveAll(c.dir)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	n := 0
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var req request
		var res result
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			res = result{Stage: "protocol", Error: err.Error(), Dropped: []droppedField{}}
		} else {
			res = c.check(req, n)
		}
		n++
		_ = enc.Encode(res)
		_ = out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
