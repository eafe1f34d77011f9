package main

// --topology-from-node-labels: the node plugin reads its own Node's labels through the
// in-cluster API (the `kubernetes` Service, the pod's service account), as drivers that
// take their zone from the node do, so one DaemonSet serves every zone. A plain HTTPS GET
// with the service account's token and CA: the driver needs one object once, not
// client-go.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

var errNoLabel = errors.New("missing node label")

// apiClient is the in-cluster API endpoint and credentials.
type apiClient struct {
	base   string // https://host:port
	token  string
	client *http.Client
}

// inClusterClient follows client-go's rest.InClusterConfig: KUBERNETES_SERVICE_HOST and
// _PORT, the service account's token and CA.
func inClusterClient(saDir string) (apiClient, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return apiClient{}, fmt.Errorf("not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset")
	}
	token, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		return apiClient{}, fmt.Errorf("service account token: %v", err)
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return apiClient{}, fmt.Errorf("service account CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return apiClient{}, fmt.Errorf("service account CA %s holds no certificate", filepath.Join(saDir, "ca.crt"))
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return apiClient{base: "https://" + net.JoinHostPort(host, port), token: strings.TrimSpace(string(token)),
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

// nodeLabels reads the Node and returns the wanted keys' values; a missing key is an
// error (a node plugin reporting half its topology is worse than one that does not start).
func (a apiClient) nodeLabels(ctx context.Context, node string, keys []string) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/api/v1/nodes/"+url.PathEscape(node), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET node %s: %s: %s", node, resp.Status, strings.TrimSpace(string(body)))
	}
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("node %s: %v", node, err)
	}
	out := map[string]string{}
	var missing []string
	for _, k := range keys {
		if v, ok := obj.Metadata.Labels[k]; ok && v != "" {
			out[k] = v
		} else {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: node %s lacks %s (--topology-from-node-labels)", errNoLabel, node, strings.Join(missing, ", "))
	}
	return out, nil
}

// topologyFromNode asks until the API answers or the bound passes: at boot the Service's
// rules may not be in place yet. A label the node lacks is final at once.
func topologyFromNode(ctx context.Context, a apiClient, node string, keys []string, bound time.Duration,
	say func(string, ...any)) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for attempt := 1; ; attempt++ {
		labels, err := a.nodeLabels(ctx, node, keys)
		if err == nil || errors.Is(err, errNoLabel) {
			return labels, err
		}
		if attempt == 1 || attempt%10 == 0 {
			say("reading node %s through %s: %v (attempt %d; asking again)", node, a.base, err, attempt)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading node %s through %s for --topology-from-node-labels within %s: %v", node, a.base, bound, err)
		case <-time.After(2 * time.Second):
		}
	}
}
