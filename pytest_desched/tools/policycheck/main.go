// Command policycheck decodes, converts, defaults and validates DeschedulerPolicy documents with
// the descheduler's own packages (the module version this binary is built against), so the
// runbook's checks say exactly what that descheduler would say at start-up. It is also the only
// source of the policy API's facts (plugin names, extension points, field names) for Python,
// which keeps no schema tables of its own.
//
// Protocol: one JSON object per stdin line, one JSON result per stdout line, in order, so many
// documents go through one process. `policycheck version` prints the version.
//
//   - {"id": "...", "policy": "<YAML or JSON text>"}: check one policy;
//   - {"id": "...", "describe": true}: the facts of this descheduler (see describe).
//
// Each policy result has these passes:
//   - the descheduler's path: descheduler.LoadPolicyConfig (non-strict top-level decode,
//     strict plugin-args decode, validation, defaults), then the start-up checks of
//     newDescheduler (nodeSelector parse, frameworkprofile.NewProfile per profile); what needs a
//     live cluster (a PriorityClass named by priorityThreshold.name, Prometheus, metrics.k8s.io)
//     is answered by stand-ins and reported as notes, never as a refusal;
//   - a strict decode of the same bytes into the same Go types, listing every field the
//     descheduler silently drops, with its path;
//   - what is decoded but never read (extension points no plugin interface serves, `disabled`
//     lists, a second pluginConfig entry for one plugin), and a dry cycle of every profile on a
//     cluster with no nodes, which shows errors plugins only log at run time (an invalid
//     nodeAffinityType).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	"sigs.k8s.io/descheduler/pkg/descheduler/metricscollector"
	"sigs.k8s.io/descheduler/pkg/descheduler/scheme"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
	"sigs.k8s.io/descheduler/pkg/version"
)

type request struct {
	ID       string `json:"id"`
	Policy   string `json:"policy"`
	Describe bool   `json:"describe,omitempty"`
}

type droppedField struct {
	Path    string   `json:"path"`
	Kind    string   `json:"kind"` // "unknown", "duplicate" or "ignored" (decoded, never read)
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
	Notes    []string        `json:"notes"` // what only a live cluster can check
	Describe *description    `json:"describe,omitempty"`
}

var fieldRe = regexp.MustCompile(`^(unknown|duplicate) field "(.*)"$`)

type checker struct {
	dir    string
	strict runtime.Decoder
	n      int
	facts  *description
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

// ---------------------------------------------------------------------------- the facts ---

// An extension point as framework/profile.registryToExtensionPoints serves it: the Plugins
// field (whose json tag is the key users write) and the interface a plugin type must implement
// to be enabled there. Plugins fields without an entry (presort, sort) are decoded, never run.
type point struct {
	field  string
	iface  reflect.Type
	evicts bool // plugins at this point evict; the others only filter for them
}

var points = []point{
	{"Deschedule", reflect.TypeOf((*frameworktypes.DeschedulePlugin)(nil)).Elem(), true},
	{"Balance", reflect.TypeOf((*frameworktypes.BalancePlugin)(nil)).Elem(), true},
	{"Filter", reflect.TypeOf((*frameworktypes.EvictorPlugin)(nil)).Elem(), false},
	{"PreEvictionFilter", reflect.TypeOf((*frameworktypes.EvictorPlugin)(nil)).Elem(), false},
}

type pluginFacts struct {
	ExtensionPoints []string `json:"extensionPoints"`
	ArgFields       []string `json:"argFields"`
	// Args fields of type api.Namespaces ({include, exclude}); "namespaces" is the one that can
	// hold a plugin to a namespace.
	NamespaceFields []string `json:"namespaceFields"`
}

type description struct {
	Version                string                 `json:"version"`
	APIVersion             string                 `json:"apiVersion"`
	Kind                   string                 `json:"kind"`
	TopLevelFields         []string               `json:"topLevelFields"`
	ExtensionPoints        []string               `json:"extensionPoints"` // every Plugins key
	RunPoints              []string               `json:"runPoints"`       // the ones a profile runs
	EvictingPoints         []string               `json:"evictingPoints"`
	Plugins                map[string]pluginFacts `json:"plugins"`
	DefaultEvictor         string                 `json:"defaultEvictor"`
	DefaultPodProtections  []string               `json:"defaultPodProtections"`
	ExtraPodProtections    []string               `json:"extraPodProtections"`
	DeprecatedEvictorFlags []string               `json:"deprecatedEvictorFlags"`
	Errors                 []string               `json:"errors"` // probes that could not answer
}

func pointKey(p point) string {
	f, _ := reflect.TypeOf(v1alpha2.Plugins{}).FieldByName(p.field)
	n, _ := jsonName(f)
	return n
}

// describe answers what Python used to keep in tables, each from this descheduler's own code:
// json tags of the Go types, the registry, the interfaces its plugin types implement, the
// defaults LoadPolicyConfig applies and the messages its validators give.
func (c *checker) describe() *description {
	if c.facts != nil {
		return c.facts
	}
	d := &description{
		Version:         version.Get().GitVersion,
		APIVersion:      v1alpha2.SchemeGroupVersion.String(),
		Kind:            reflect.TypeOf(v1alpha2.DeschedulerPolicy{}).Name(),
		TopLevelFields:  jsonNames(reflect.TypeOf(v1alpha2.DeschedulerPolicy{})),
		ExtensionPoints: jsonNames(reflect.TypeOf(v1alpha2.Plugins{})),
		RunPoints:       []string{},
		EvictingPoints:  []string{},
		Plugins:         map[string]pluginFacts{},
		Errors:          []string{},
	}
	for _, p := range points {
		d.RunPoints = append(d.RunPoints, pointKey(p))
		if p.evicts {
			d.EvictingPoints = append(d.EvictingPoints, pointKey(p))
		}
	}
	nsType := reflect.TypeOf(api.Namespaces{})
	for name, util := range pluginregistry.PluginRegistry {
		pf := pluginFacts{ExtensionPoints: []string{}, ArgFields: []string{}, NamespaceFields: []string{}}
		pt := reflect.TypeOf(util.PluginType)
		for _, p := range points {
			if pt != nil && pt.Implements(p.iface) {
				pf.ExtensionPoints = append(pf.ExtensionPoints, pointKey(p))
			}
		}
		if util.PluginArgInstance != nil {
			at := reflect.TypeOf(util.PluginArgInstance).Elem()
			pf.ArgFields = jsonNames(at)
			for _, f := range pf.ArgFields {
				ft, ok := jsonField(at, f)
				for ok && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ok && ft == nsType {
					pf.NamespaceFields = append(pf.NamespaceFields, f)
				}
			}
		}
		d.Plugins[name] = pf
	}
	d.DefaultEvictor = c.probeDefaultEvictor(d)
	d.DefaultPodProtections, d.ExtraPodProtections, d.DeprecatedEvictorFlags = probeEvictor(d)
	c.facts = d
	return d
}

// probeDefaultEvictor loads a profile that enables nothing: the plugin LoadPolicyConfig's
// defaults put at the filter points is the default evictor.
func (c *checker) probeDefaultEvictor(d *description) string {
	text := fmt.Sprintf(`{"apiVersion": %q, "kind": %q, "profiles": [{"name": "probe"}]}`,
		d.APIVersion, d.Kind)
	policy, err := c.load(text, "probe", fake.NewSimpleClientset())
	if err != nil || len(policy.Profiles) != 1 {
		d.Errors = append(d.Errors, fmt.Sprintf("default evictor probe: %v", err))
		return ""
	}
	f := policy.Profiles[0].Plugins.Filter.Enabled
	if len(f) != 1 {
		d.Errors = append(d.Errors, fmt.Sprintf("default evictor probe: filter plugins %v", f))
		return ""
	}
	return f[0]
}

var optionsRe = regexp.MustCompile(`in (ExtraEnabled|DefaultDisabled): "[^"]*"\. Valid options are: \[([^\]]*)\]`)

// probeEvictor asks the default evictor's validator which pod protections it accepts where
// (its message lists them) and which boolean args it refuses next to podProtections (the
// deprecated ones).
func probeEvictor(d *description) (def, extra, deprecated []string) {
	def, extra, deprecated = []string{}, []string{}, []string{}
	util, ok := pluginregistry.PluginRegistry[d.DefaultEvictor]
	if !ok || util.PluginArgValidator == nil {
		d.Errors = append(d.Errors, "pod protection probe: no default evictor validator")
		return
	}
	validate := func(raw string) string {
		obj := util.PluginArgInstance.DeepCopyObject()
		if _, _, err := v1alpha2.Codecs.UniversalDecoder().Decode([]byte(raw), nil, obj); err != nil {
			return "decode: " + err.Error()
		}
		if err := util.PluginArgValidator(obj); err != nil {
			return err.Error()
		}
		return ""
	}
	msg := validate(`{"podProtections": {"extraEnabled": ["-"], "defaultDisabled": ["-"]}}`)
	for _, m := range optionsRe.FindAllStringSubmatch(msg, -1) {
		names := strings.Fields(m[2])
		if m[1] == "ExtraEnabled" {
			extra = names
		} else {
			def = names
		}
	}
	if len(def) == 0 || len(extra) == 0 {
		d.Errors = append(d.Errors, "pod protection probe: "+msg)
		return
	}
	mixed := func(flag string) string {
		return fmt.Sprintf(`{%s"podProtections": {"extraEnabled": [%q]}}`, flag, extra[0])
	}
	base := validate(mixed(""))
	at := reflect.TypeOf(util.PluginArgInstance).Elem()
	for _, name := range jsonNames(at) {
		ft, _ := jsonField(at, name)
		if ft.Kind() != reflect.Bool {
			continue
		}
		got := validate(mixed(fmt.Sprintf("%q: true, ", name)))
		if strings.Contains(got, "Deprecated") && !strings.Contains(base, "Deprecated") {
			deprecated = append(deprecated, name)
		}
	}
	return
}

// ------------------------------------------------------------------------------ a check ---

func (c *checker) load(text, name string, client *fake.Clientset) (*api.DeschedulerPolicy, error) {
	// LoadPolicyConfig reads a file, as the descheduler does with --policy-config-file.
	c.n++
	path := filepath.Join(c.dir, fmt.Sprintf("policy-%d.yaml", c.n))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return nil, err
	}
	defer os.Remove(path)
	policy, err := descheduler.LoadPolicyConfig(path, client, pluginregistry.PluginRegistry)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), path, name))
	}
	return policy, nil
}

func (c *checker) check(req request) result {
	res := result{ID: req.ID, Dropped: []droppedField{}, Notes: []string{}}
	data := []byte(req.Policy)
	res.Dropped, res.Strict = c.strictPass(data)
	raw := rawPolicy(data)
	res.Dropped = append(res.Dropped, argsPass(raw)...)
	res.Dropped = append(res.Dropped, ignoredPass(raw)...)

	name := req.ID
	if name == "" {
		name = "policy.yaml"
	}
	client := fake.NewSimpleClientset()
	// setDefaultEvictor and the evictor read a PriorityClass named by priorityThreshold.name
	// from the cluster: a stand-in answers, and a note says what only a live cluster can tell.
	classes := standInPriorityClasses(client)
	policy, err := c.load(req.Policy, name, client)
	if err != nil {
		res.Error = err.Error()
		res.Stage = "validate"
		if strings.HasPrefix(err.Error(), "failed decoding") {
			res.Stage = "decode"
		} else if strings.HasPrefix(err.Error(), "failed to read") {
			res.Stage = "io"
		}
		return res
	}
	res.Profiles = len(policy.Profiles)
	for _, p := range policy.Profiles {
		res.Enabled += len(p.Plugins.Deschedule.Enabled) + len(p.Plugins.Balance.Enabled)
	}
	res.Effect = effective(policy, raw)
	res.Notes = clusterNotes(policy, classes())
	logged, err := startup(policy, client)
	res.Dropped = append(res.Dropped, runtimePass(logged, raw)...)
	if err != nil {
		res.Stage, res.Error = "startup", err.Error()
		return res
	}
	res.Accepted = true
	return res
}

func rawPolicy(data []byte) *v1alpha2.DeschedulerPolicy {
	raw := &v1alpha2.DeschedulerPolicy{}
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil || json.Unmarshal(jsonData, raw) != nil {
		return &v1alpha2.DeschedulerPolicy{}
	}
	return raw
}

// standInPriorityClasses makes the fake cluster answer every PriorityClass read with one of
// that name (value 0) and returns the names asked for.
func standInPriorityClasses(client *fake.Clientset) func() []string {
	var mu sync.Mutex
	asked := []string{}
	client.PrependReactor("get", "priorityclasses",
		func(action k8stesting.Action) (bool, runtime.Object, error) {
			name := action.(k8stesting.GetAction).GetName()
			mu.Lock()
			if !slices.Contains(asked, name) {
				asked = append(asked, name)
			}
			mu.Unlock()
			return true, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
		})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
}

// clusterNotes says which of the accepted policy's settings only a live cluster can check.
func clusterNotes(policy *api.DeschedulerPolicy, classes []string) []string {
	notes := []string{}
	for _, name := range classes {
		notes = append(notes, fmt.Sprintf("priorityThreshold.name %q: the descheduler reads "+
			"PriorityClass %q from the cluster at start-up and exits if it is missing; its value "+
			"becomes the threshold (checked here with a stand-in)", name, name))
	}
	notes = append(notes, providerNotes(policy)...)
	if metricsCollectorEnabled(policy) {
		notes = append(notes, "metricsCollector.enabled: the cluster must serve metrics.k8s.io "+
			"(metrics-server) to the descheduler")
	}
	return notes
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
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
func argsPass(raw *v1alpha2.DeschedulerPolicy) []droppedField {
	out := []droppedField{}
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

// ignoredPass lists what decodes without error and is never read: plugins enabled at an
// extension point framework/profile does not run, `disabled` lists (NewProfile reads only
// `enabled`), and any pluginConfig entry after the first for a plugin (getPluginConfig takes the
// first).
func ignoredPass(raw *v1alpha2.DeschedulerPolicy) []droppedField {
	out := []droppedField{}
	run := map[string]bool{}
	for _, p := range points {
		run[p.field] = true
	}
	pt := reflect.TypeOf(v1alpha2.Plugins{})
	for i, prof := range raw.Profiles {
		pv := reflect.ValueOf(prof.Plugins)
		for k := 0; k < pt.NumField(); k++ {
			key, _ := jsonName(pt.Field(k))
			set, ok := pv.Field(k).Interface().(v1alpha2.PluginSet)
			if !ok {
				continue
			}
			base := fmt.Sprintf("profiles[%d].plugins.%s", i, key)
			if len(set.Enabled) > 0 && !run[pt.Field(k).Name] {
				out = append(out, droppedField{
					Path: base + ".enabled", Kind: "ignored", Known: []string{},
					Message: fmt.Sprintf("the %q extension point is decoded but never run; "+
						"%v would never be called", key, set.Enabled),
				})
			}
			if len(set.Disabled) > 0 {
				out = append(out, droppedField{
					Path: base + ".disabled", Kind: "ignored", Known: []string{},
					Message: fmt.Sprintf("`disabled` lists are decoded but never read; "+
						"%v stays as `enabled` says", set.Disabled),
				})
			}
		}
		first := map[string]int{}
		for j, pc := range prof.PluginConfigs {
			if f, seen := first[pc.Name]; seen {
				out = append(out, droppedField{
					Path: fmt.Sprintf("profiles[%d].pluginConfig[%d]", i, j), Kind: "ignored",
					Known: []string{},
					Message: fmt.Sprintf("a second pluginConfig entry for %s: only the first "+
						"(pluginConfig[%d]) is used", pc.Name, f),
				})
				continue
			}
			first[pc.Name] = j
		}
	}
	return out
}

// ----------------------------------------------------------------------------- start-up ---

// logged is one error a plugin logged (not returned) while building or running.
type logged struct {
	profile int
	plugin  string
	msg     string
	kv      []any
}

// captureSink records the Error-level entries of the loggers plugins derive from the context
// they are built with; everything else is discarded.
type captureSink struct {
	mu      *sync.Mutex
	entries *[]logged
	profile int
	values  []any
}

func (s captureSink) Init(logr.RuntimeInfo)        {}
func (s captureSink) Enabled(int) bool             { return false }
func (s captureSink) Info(int, string, ...any)     {}
func (s captureSink) WithName(string) logr.LogSink { return s }
func (s captureSink) WithValues(kv ...any) logr.LogSink {
	s.values = append(slices.Clone(s.values), kv...)
	return s
}

func (s captureSink) Error(err error, msg string, kv ...any) {
	all := append(slices.Clone(s.values), kv...)
	e := logged{profile: s.profile, msg: msg}
	for i := 0; i+1 < len(all); i += 2 {
		if all[i] == "plugin" {
			e.plugin = fmt.Sprint(all[i+1])
		} else if k := fmt.Sprint(all[i]); k != "ExtensionPoint" {
			e.kv = append(e.kv, k, all[i+1])
		}
	}
	if err != nil {
		e.kv = append(e.kv, "err", err.Error())
	}
	s.mu.Lock()
	*s.entries = append(*s.entries, e)
	s.mu.Unlock()
}

// startup runs what newDescheduler does with a loaded policy before its first cycle: parse
// the nodeSelector and build every profile (frameworkprofile.NewProfile), which is where an
// enabled plugin that is not registered, or has no pluginConfig, fails. The metrics collector
// and Prometheus client exist exactly when newDescheduler would create them. Then one cycle of
// every profile on a cluster without nodes: what plugins log as errors there they log on every
// real cycle too.
func startup(policy *api.DeschedulerPolicy, client *fake.Clientset) ([]logged, error) {
	var selector labels.Selector
	if policy.NodeSelector != nil {
		s, err := labels.Parse(*policy.NodeSelector)
		if err != nil {
			return nil, err
		}
		selector = s
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	evictor, err := evictions.NewPodEvictor(ctx, client, events.NewFakeRecorder(100), podInformer,
		features.DefaultMutableFeatureGate, evictions.NewOptions().WithDryRun(true))
	if err != nil {
		return nil, err
	}
	kubeMetrics, promURL := providerNeeds(policy)
	var collector *metricscollector.MetricsCollector
	if metricsCollectorEnabled(policy) || kubeMetrics {
		collector = metricscollector.NewMetricsCollector(factory.Core().V1().Nodes().Lister(),
			metricsfake.NewSimpleClientset(), selector)
	}
	var prom promGetter // nil unless a Prometheus URL is configured (prom_*.go)
	if promURL != "" {
		prom = refusingPromGetter()
	}
	var mu sync.Mutex
	entries := []logged{}
	for idx, profile := range policy.Profiles {
		sink := captureSink{mu: &mu, entries: &entries, profile: idx}
		pctx := klog.NewContext(ctx, logr.New(sink))
		p, err := newProfile(pctx, profile, idx, profileDeps{client, factory, evictor, collector, prom})
		if err != nil {
			// The descheduler's own wording (pkg/descheduler/descheduler.go newDescheduler).
			return entries, fmt.Errorf("unable to create %q profile: %v", profile.Name, err)
		}
		dryCycle(pctx, p)
	}
	return entries, nil
}

// metricsCollectorEnabled reads DeschedulerPolicy.MetricsCollector.Enabled whether the field
// is a struct (v0.32 and before) or a pointer to one (v0.33 on): by reflection, one code path
// for every release instead of another build tag.
func metricsCollectorEnabled(policy *api.DeschedulerPolicy) bool {
	v := reflect.ValueOf(policy).Elem().FieldByName("MetricsCollector")
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false
	}
	f := v.FieldByName("Enabled")
	return f.IsValid() && f.Kind() == reflect.Bool && f.Bool()
}

// profileDeps is what newDescheduler hands a profile; newProfile (profile_*.go, one per
// generation of frameworkprofile.NewProfile) builds the profile from it.
type profileDeps struct {
	client    *fake.Clientset
	factory   informers.SharedInformerFactory
	evictor   *evictions.PodEvictor
	collector *metricscollector.MetricsCollector
	prom      promGetter
}

// profileOptions is what newDescheduler passes every profile. The four options here are in
// every release's frameworkprofile; the ones that came and changed later are each one build
// tag's file (prom_*.go, instance_*.go), chosen by probing the tree (tools/gobuild.py).
func profileOptions(idx int, d profileDeps) []frameworkprofile.Option {
	opts := []frameworkprofile.Option{
		frameworkprofile.WithClientSet(d.client),
		frameworkprofile.WithSharedInformerFactory(d.factory),
		frameworkprofile.WithPodEvictor(d.evictor),
		frameworkprofile.WithMetricsCollector(d.collector),
	}
	opts = append(opts, promOptions(d.prom)...)
	return append(opts, instanceOptions(idx)...)
}

// cycler is a built profile: what dryCycle runs.
type cycler interface {
	RunDeschedulePlugins(context.Context, []*corev1.Node) *frameworktypes.Status
	RunBalancePlugins(context.Context, []*corev1.Node) *frameworktypes.Status
}

// dryCycle runs a built profile once with no nodes; returned statuses depend on the cluster
// (and a stand-in Prometheus refuses every query), so only logged errors count.
func dryCycle(ctx context.Context, p cycler) {
	defer func() { _ = recover() }()
	p.RunDeschedulePlugins(ctx, nil)
	p.RunBalancePlugins(ctx, nil)
}

// runtimePass turns errors plugins log during the dry cycle into ignored settings, placed at
// the plugin's args in the document as written.
func runtimePass(entries []logged, raw *v1alpha2.DeschedulerPolicy) []droppedField {
	out := []droppedField{}
	for _, e := range entries {
		path := fmt.Sprintf("profiles[%d].plugins", e.profile)
		if e.profile < len(raw.Profiles) {
			for j, pc := range raw.Profiles[e.profile].PluginConfigs {
				if pc.Name == e.plugin {
					path = fmt.Sprintf("profiles[%d].pluginConfig[%d].args", e.profile, j)
					break
				}
			}
		}
		detail := ""
		for i := 0; i+1 < len(e.kv); i += 2 {
			detail += fmt.Sprintf(" %v=%v", e.kv[i], e.kv[i+1])
		}
		who := e.plugin
		if who == "" {
			who = "a plugin"
		}
		out = append(out, droppedField{
			Path: path, Kind: "ignored", Known: []string{},
			Message: fmt.Sprintf("%s logs %q (%s) on every cycle instead of refusing it at "+
				"start-up; that setting does nothing", who, e.msg, strings.TrimSpace(detail)),
		})
	}
	return out
}

// effective is the loaded (converted, defaulted) policy in its v1alpha2 form; a threshold the
// descheduler reads from a PriorityClass keeps its name (the value lives on the cluster).
func effective(policy *api.DeschedulerPolicy, raw *v1alpha2.DeschedulerPolicy) json.RawMessage {
	// v0.36.0's external conversion of typed plugin args goes through a scheme that does not
	// know them, so convert the policy without args and put each typed args object back
	// (a RawExtension marshals its Object with the args type's own json tags).
	in := policy.DeepCopy()
	args := map[[2]int]runtime.Object{}
	for i := range in.Profiles {
		for j := range in.Profiles[i].PluginConfigs {
			a := in.Profiles[i].PluginConfigs[j].Args
			if name := thresholdName(raw, i, in.Profiles[i].PluginConfigs[j].Name); name != "" {
				a = withThresholdName(a, name)
			}
			args[[2]int{i, j}] = a
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
	ext.Kind = reflect.TypeOf(v1alpha2.DeschedulerPolicy{}).Name()
	b, err := json.Marshal(ext)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"marshalError": err.Error()})
	}
	return b
}

// thresholdName is priorityThreshold.name of plugin's args in profile i as written.
func thresholdName(raw *v1alpha2.DeschedulerPolicy, i int, plugin string) string {
	if i >= len(raw.Profiles) {
		return ""
	}
	for _, pc := range raw.Profiles[i].PluginConfigs {
		if pc.Name != plugin || pc.Args.Raw == nil {
			continue
		}
		var a struct {
			PriorityThreshold *struct {
				Name string `json:"name"`
			} `json:"priorityThreshold"`
		}
		if json.Unmarshal(pc.Args.Raw, &a) == nil && a.PriorityThreshold != nil {
			return a.PriorityThreshold.Name
		}
		return ""
	}
	return ""
}

// withThresholdName replaces a stand-in threshold value by the PriorityClass name written.
func withThresholdName(args runtime.Object, name string) runtime.Object {
	if args == nil {
		return nil
	}
	out := args.DeepCopyObject()
	v := reflect.ValueOf(out).Elem()
	f := v.FieldByName("PriorityThreshold")
	if !f.IsValid() || f.Type() != reflect.TypeOf(&api.PriorityThreshold{}) {
		return args
	}
	f.Set(reflect.ValueOf(&api.PriorityThreshold{Name: name}))
	return out
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
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var req request
		var res result
		switch err := json.Unmarshal([]byte(line), &req); {
		case err != nil:
			res = result{Stage: "protocol", Error: err.Error(), Dropped: []droppedField{},
				Notes: []string{}}
		case req.Describe:
			res = result{ID: req.ID, Accepted: true, Dropped: []droppedField{}, Notes: []string{},
				Describe: c.describe()}
		default:
			res = c.check(req)
		}
		_ = enc.Encode(res)
		_ = out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
