package driver

// Sockets and gRPC servers: unix endpoints with stale sockets removed first (a killed
// driver leaves its socket behind, and listen would fail with "address in use"), served
// until a signal, then stopped gracefully and the sockets removed.

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// SocketPath turns "unix:///path/x.sock" (or "unix:/path", or a bare path) into the path.
func SocketPath(endpoint string) (string, error) {
	path := endpoint
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		path = strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "unix:"):
		path = strings.TrimPrefix(endpoint, "unix:")
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("endpoint %q: only unix:// endpoints are served", endpoint)
	}
	if path == "" || !filepath.IsAbs(path) {
		return "", fmt.Errorf("endpoint %q: want unix:///absolute/path.sock", endpoint)
	}
	return path, nil
}

// ListenUnix removes a stale socket at path and listens there.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket; not removing it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket %s: %v", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}

// Served is one gRPC server on one socket.
type Served struct {
	Server *grpc.Server
	Path   string
}

// Stop stops gracefully (in-flight calls finish; a bounded wait, then a hard stop) and
// removes the socket.
func (s Served) Stop(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		s.Server.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		s.Server.Stop()
	}
	_ = os.Remove(s.Path)
}
