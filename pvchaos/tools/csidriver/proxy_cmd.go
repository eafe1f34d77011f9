package main

// `pvchaos-csi proxy`: the fault proxy (package proxy) in front of any driver's socket.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"pvchaos.dev/csidriver/driver"
	"pvchaos.dev/csidriver/proxy"
)

type proxyOptions struct{ listen, target, rules, log string }

func parseProxyFlags(args []string) (proxyOptions, error) {
	var o proxyOptions
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.listen, "listen", "", "unix:///path.sock the clients (sidecars, kubelet) dial")
	fs.StringVar(&o.target, "target", "", "unix:///path.sock the driver serves")
	fs.StringVar(&o.rules, "rules", "", "JSON rules file, re-read when it changes (absent: no rules)")
	fs.StringVar(&o.log, "log", "", "file to append one JSON line per call to")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %s", strings.Join(fs.Args(), " "))
	}
	if o.listen == "" || o.target == "" {
		return o, errors.New("--listen and --target are required")
	}
	return o, nil
}

func proxyMain(args []string) int {
	o, err := parseProxyFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Println(usage)
		return 0
	}
	var listen, target string
	if err == nil {
		listen, err = driver.SocketPath(o.listen)
	}
	if err == nil {
		target, err = driver.SocketPath(o.target)
	}
	if err == nil && listen == target {
		err = fmt.Errorf("--listen and --target are the same socket %s", listen)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi proxy: %v\n", err)
		return 2
	}
	var p *proxy.Proxy
	rules, err := proxy.NewSet(o.rules, func(err error) {
		if p == nil {
			return
		}
		if err != nil {
			p.Event(map[string]string{"time": time.Now().UTC().Format(time.RFC3339Nano), "event": "rules rejected, previous rules kept", "error": err.Error()})
			fmt.Fprintf(os.Stderr, "pvchaos-csi proxy: %s: %v (previous rules kept)\n", o.rules, err)
		} else {
			p.Event(map[string]string{"time": time.Now().UTC().Format(time.RFC3339Nano), "event": "rules loaded"})
		}
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi proxy: %s: %v\n", o.rules, err)
		return 2
	}
	if p, err = proxy.New(target, rules, o.log); err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi proxy: %v\n", err)
		return 1
	}
	defer p.Close()
	lis, err := driver.ListenUnix(listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi proxy: listening on %s: %v\n", listen, err)
		return 1
	}
	srv := p.Server()
	served := driver.Served{Server: srv, Path: listen}
	defer served.Stop(2 * time.Second) // a hung call must not hold the stop for long
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(lis) }()
	fmt.Fprintf(os.Stderr, "%s pvchaos-csi proxy: serving %s for %s (rules %s)\n",
		time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), listen, target, o.rules)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sigs:
		return 0
	case err := <-errs:
		fmt.Fprintf(os.Stderr, "pvchaos-csi proxy: gRPC server stopped: %v\n", err)
		return 1
	}
}
