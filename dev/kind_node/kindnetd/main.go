// kindnetd for the offline kind node image: the part of kind's CNI daemon a kind cluster
// needs to network its pods, written for pytest-desched because kind's own kindnetd lives
// in a nested Go module (sigs.k8s.io/kind/images/kindnetd) that the module proxy does not
// serve. It runs as kind's default-cni.yaml DaemonSet (hostNetwork, NET_ADMIN) and:
//
//   - finds its node by HOST_IP among the nodes' InternalIPs,
//   - writes /etc/cni/net.d/10-kindnet.conflist (ptp + host-local on the node's podCIDR,
//     portmap) once the node has a podCIDR,
//   - keeps a route to every other node's podCIDRs via that node's InternalIP.
//
// Not done (nothing in an offline lab needs it): masquerading pod traffic that leaves the
// cluster, network policies, IPv6 and dual stack. It talks to the API server at
// CONTROL_PLANE_ENDPOINT (set by kind) so it does not wait for kube-proxy.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	cniDir      = "/etc/cni/net.d"
	cniConfName = "10-kindnet.conflist"
	resync      = 10 * time.Second
)

func clientConfig() (*rest.Config, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	return cfg, nil
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address).To4() != nil {
			return a.Address
		}
	}
	return ""
}

func podCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

func mtu() int {
	raw, err := os.ReadFile("/sys/class/net/eth0/mtu")
	if err != nil {
		return 1500
	}
	var m int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(raw)), "%d", &m); err != nil || m <= 0 {
		return 1500
	}
	return m
}

func conflist(cidrs []string) ([]byte, error) {
	ranges := [][]map[string]string{}
	for _, c := range cidrs {
		if ip, _, err := net.ParseCIDR(c); err == nil && ip.To4() != nil {
			ranges = append(ranges, []map[string]string{{"subnet": c}})
		}
	}
	conf := map[string]any{
		"cniVersion": "0.3.1",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    mtu(),
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"ranges":  ranges,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

func sync(ctx context.Context, cs kubernetes.Interface, hostIP string) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		ip := internalIP(n)
		cidrs := podCIDRs(n)
		if ip == "" || len(cidrs) == 0 {
			continue
		}
		if ip == hostIP {
			data, err := conflist(cidrs)
			if err != nil {
				return err
			}
			changed, err := writeIfChanged(filepath.Join(cniDir, cniConfName), data)
			if err != nil {
				return err
			}
			if changed {
				log.Printf("wrote %s for node %s, podCIDRs %v", cniConfName, n.Name, cidrs)
			}
			continue
		}
		gw := net.ParseIP(ip)
		for _, c := range cidrs {
			_, dst, err := net.ParseCIDR(c)
			if err != nil || dst.IP.To4() == nil {
				continue
			}
			route := netlink.Route{Dst: dst, Gw: gw}
			if err := netlink.RouteReplace(&route); err != nil {
				return fmt.Errorf("route %s via %s (node %s): %w", c, ip, n.Name, err)
			}
		}
	}
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	hostIP := os.Getenv("HOST_IP")
	if hostIP == "" {
		log.Fatal("HOST_IP is not set (the DaemonSet passes status.hostIP)")
	}
	cfg, err := clientConfig()
	if err != nil {
		log.Fatalf("kube client config: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("kube client: %v", err)
	}
	log.Printf("kindnetd (pytest-desched) on %s, API server %s", hostIP, cfg.Host)
	ctx := context.Background()
	for {
		if err := sync(ctx, cs, hostIP); err != nil {
			log.Printf("sync: %v", err)
		}
		time.Sleep(resync)
	}
}
