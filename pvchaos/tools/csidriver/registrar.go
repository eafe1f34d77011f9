package main

// `pvchaos-csi registrar`: node-driver-registrar's job in a container of its own, for
// packages laid out as upstream ships node plugins (the driver serving
// /var/lib/kubelet/plugins/<name>/csi.sock, the registrar serving
// /var/lib/kubelet/plugins_registry/<name>-reg.sock). Upstream's node-driver-registrar
// is not served by the Go module proxy here, so this stands in for it with its flags:
// it asks the driver its name (GetPluginInfo on --csi-address, retried until the driver
// answers), then serves the kubelet's Registration service pointing the kubelet at
// --kubelet-registration-path, and exits when the kubelet reports a failed registration
// (as upstream does, so the container restarts and the kubelet tries again).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"pvchaos.dev/csidriver/driver"
)

type registrarOptions struct {
	csiAddress       string        // the driver's socket as this container sees it
	kubeletRegPath   string        // the same socket as the kubelet (on the host) sees it
	pluginRegDir     string        // the kubelet's plugins_registry, as mounted here
	timeout          time.Duration // per GetPluginInfo attempt
	connectionBudget time.Duration // 0: keep asking until the driver answers (upstream's default)
}

func parseRegistrarFlags(args []string) (registrarOptions, error) {
	o := registrarOptions{}
	fs := flag.NewFlagSet("registrar", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.csiAddress, "csi-address", "/csi/csi.sock", "the CSI driver's socket, as mounted in this container")
	fs.StringVar(&o.kubeletRegPath, "kubelet-registration-path", "", "the driver's socket on the node, where the kubelet dials it")
	fs.StringVar(&o.pluginRegDir, "plugin-registration-path", "/registration", "the kubelet's plugins_registry directory, as mounted here")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on one GetPluginInfo call")
	fs.DurationVar(&o.connectionBudget, "connection-timeout", 0, "give up when the driver has not answered for this long (0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %s", strings.Join(fs.Args(), " "))
	}
	if o.kubeletRegPath == "" {
		return o, errors.New("missing --kubelet-registration-path")
	}
	if p, err := driver.SocketPath(o.kubeletRegPath); err != nil {
		return o, fmt.Errorf("--kubelet-registration-path: %v", err)
	} else {
		o.kubeletRegPath = p
	}
	p, err := driver.SocketPath(o.csiAddress)
	if err != nil {
		return o, fmt.Errorf("--csi-address: %v", err)
	}
	o.csiAddress = p
	if !filepath.IsAbs(o.pluginRegDir) {
		return o, fmt.Errorf("--plugin-registration-path %q: want an absolute directory", o.pluginRegDir)
	}
	if o.timeout <= 0 || o.connectionBudget < 0 {
		return o, errors.New("--timeout must be > 0 and --connection-timeout >= 0")
	}
	return o, nil
}

// driverName asks the driver its name, again every second until it answers or ctx ends.
func driverName(ctx context.Context, o registrarOptions, log *driver.Logger) (string, error) {
	conn, err := grpc.NewClient("unix://"+o.csiAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	id := csi.NewIdentityClient(conn)
	for attempt := 1; ; attempt++ {
		call, cancel := context.WithTimeout(ctx, o.timeout)
		info, err := id.GetPluginInfo(call, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil && info.GetName() != "" {
			return info.GetName(), nil
		}
		if err == nil {
			err = errors.New("empty name (the spec requires one)")
		}
		if attempt == 1 || attempt%30 == 0 {
			log.Eventf("GetPluginInfo on %s: %v (attempt %d; asking again)", o.csiAddress, err, attempt)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("GetPluginInfo on %s: %v (last answer: %v)", o.csiAddress, ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

func runRegistrar(o registrarOptions) int {
	log, _ := driver.NewLogger("registrar", "")
	defer log.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ask := ctx
	if o.connectionBudget > 0 {
		var cancel context.CancelFunc
		ask, cancel = context.WithTimeout(ctx, o.connectionBudget)
		defer cancel()
	}
	name, err := driverName(ask, o, log)
	if err != nil {
		log.Eventf("fatal: %v", err)
		return 1
	}
	regPath := filepath.Join(o.pluginRegDir, name+"-reg.sock")
	failed := make(chan string, 1)
	server := grpc.NewServer(grpc.UnaryInterceptor(log.Interceptor()))
	registerapi.RegisterRegistrationServer(server, &driver.Registrar{
		DriverName: name, Endpoint: o.kubeletRegPath, Log: log, Failed: failed,
	})
	lis, err := driver.ListenUnix(regPath)
	if err != nil {
		log.Eventf("fatal: listening on %s: %v", regPath, err)
		return 1
	}
	served := driver.Served{Server: server, Path: regPath}
	defer served.Stop(10 * time.Second)
	errs := make(chan error, 1)
	go func() { errs <- server.Serve(lis) }()
	log.Eventf("serving kubelet plugin registration of %s on %s (kubelet dials %s)", name, regPath, o.kubeletRegPath)
	select {
	case <-ctx.Done():
		log.Eventf("stopping")
		return 0
	case err := <-errs:
		log.Eventf("fatal: gRPC server stopped: %v", err)
		return 1
	case why := <-failed:
		log.Eventf("fatal: kubelet registration failed: %s; exiting so that the container restarts", why)
		return 1
	}
}

func registrarMain(args []string) int {
	o, err := parseRegistrarFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Println(usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi registrar: %v\n", err)
		return 2
	}
	return runRegistrar(o)
}
