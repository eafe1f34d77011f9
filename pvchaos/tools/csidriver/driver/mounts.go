package driver

// Bind mounts and the mount table. Mount state comes from /proc/self/mountinfo, never
// from "is the directory empty", so every call can decide idempotently.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MountInfoPath is read for the mount table; a test may point it elsewhere.
var MountInfoPath = "/proc/self/mountinfo"

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountEntry is one line of the mount table: the filesystem's major:minor (field 3),
// the path inside it that is mounted (field 4) and where (field 5).
type MountEntry struct {
	MajMin string
	Root   string
	Point  string
}

// MountEntries reads the mount table.
func MountEntries() ([]MountEntry, error) {
	f, err := os.Open(MountInfoPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []MountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 {
			out = append(out, MountEntry{MajMin: fields[2], Root: unescapeMountPath(fields[3]), Point: unescapeMountPath(fields[4])})
		}
	}
	return out, sc.Err()
}

// MountPoints lists the mount points of the mount table (field 5 of each line).
func MountPoints() ([]string, error) {
	entries, err := MountEntries()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Point
	}
	return out, nil
}

// canonical is the absolute, symlink-free path, as the mount table spells it (the last
// element may be missing, so only the parent is resolved).
func canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if parent, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(parent, filepath.Base(abs))
	}
	return abs
}

// IsMountPoint says whether something is mounted at path.
func IsMountPoint(path string) (bool, error) {
	points, err := MountPoints()
	if err != nil {
		return false, err
	}
	want := canonical(path)
	for _, p := range points {
		if p == want {
			return true, nil
		}
	}
	return false, nil
}

// BindMount mounts source on target (both must exist), read-only when asked: a bind
// mount ignores MS_RDONLY, so read-only takes a second remount.
func BindMount(source, target string, readonly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", source, target, err)
	}
	if readonly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// UnmountAll unmounts target until nothing is mounted there (a repeated publish by a
// buggy caller may have stacked mounts); nothing mounted is fine: idempotent.
func UnmountAll(target string) error {
	for i := 0; i < 16; i++ {
		mounted, err := IsMountPoint(target)
		if err != nil {
			return err
		}
		if !mounted {
			return nil
		}
		if err := unix.Unmount(target, 0); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 16 unmounts", target)
}
