package main

// `pvchaos-csi latency --endpoint unix:///x.sock --calls N`: N GetPluginInfo calls on one
// connection, one at a time, and their latency (median, p99) as one JSON line. The
// proxy's benchmark (bench/csi_proxy.py) runs it against a driver directly and through
// the proxy: the difference is what the proxy adds to every call. A Go client, so the
// client's own cost is small and the same on both sides.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"pvchaos.dev/csidriver/driver"
)

func latencyMain(args []string) int {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	endpoint := fs.String("endpoint", "", "unix:///path.sock to call")
	calls := fs.Int("calls", 2000, "calls to time (after 100 warm-up calls)")
	err := fs.Parse(args)
	if err == nil && *calls < 1 {
		err = errors.New("--calls must be >= 1")
	}
	var path string
	if err == nil {
		path, err = driver.SocketPath(*endpoint)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi latency: %v\n", err)
		return 2
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi latency: %v\n", err)
		return 1
	}
	defer conn.Close()
	client := csi.NewIdentityClient(conn)
	times := make([]time.Duration, 0, *calls)
	for i := 0; i < *calls+100; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t := time.Now()
		_, err := client.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		d := time.Since(t)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "pvchaos-csi latency: GetPluginInfo on %s: %v\n", path, err)
			return 1
		}
		if i >= 100 {
			times = append(times, d)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	out, _ := json.Marshal(map[string]any{"endpoint": path, "calls": len(times),
		"median_us": us(times[len(times)/2]), "p99_us": us(times[len(times)*99/100])})
	fmt.Println(string(out))
	return 0
}
