package driver

// Loop devices: a block volume's sparse backing file made a real block device, because
// the kubelet and the container runtime need one. The kubelet's CSI block mapper
// (k8s.io/kubernetes pkg/volume/csi/csi_block.go) bind-mounts the path NodePublishVolume
// published into its global map path and symlinks the pod's device path to it
// (pkg/volume/util.MapBlockVolume), then takes a loop device over that bind mount as an
// fd lock (volumepathhandler.AttachFileDevice, `losetup -f`); containerd makes the
// container's device node from the major:minor it stats there, and a regular file is
// refused ("not a device node"). So NodeStage attaches a loop device over the backing
// file (reusing one that already backs it), NodePublish bind-mounts that device onto the
// target, and NodeUnstage detaches it once no mount of it is left.
//
// Done with the kernel's ioctls rather than losetup: a kind node's /dev is a tmpfs the
// container engine filled when the node started, so a loop device the kernel adds later
// has no node there; the plugin makes the node (mknod, as udev would) from
// /sys/block/loopN/dev. A free device's node is made too, so the kubelet's own
// `losetup -f` finds the device it is handed.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Where loop devices are listed and their nodes live; tests do not change them (loop
// devices are the kernel's, one set per machine).
const (
	loopSysfs   = "/sys/block"
	devDir      = "/dev"
	loopControl = "/dev/loop-control"
)

// loopMu serialises this process's attaches and detaches: two stages of one volume at
// once must not attach two devices.
var loopMu sync.Mutex

// loopNames lists the loop devices the kernel has (bound or free), as "loopN".
func loopNames() ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(loopSysfs, "loop*"))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(paths))
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names, nil
}

// backingFileOf is what sysfs says backs a loop device, "" when it is free. A file
// deleted since reads with a " (deleted)" suffix.
func backingFileOf(name string) string {
	data, err := os.ReadFile(filepath.Join(loopSysfs, name, "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(data)), "(deleted)"))
}

// loopNode makes sure /dev/<name> is the block device node of loop device <name> and
// returns its path.
func loopNode(name string) (string, error) {
	path := filepath.Join(devDir, name)
	raw, err := os.ReadFile(filepath.Join(loopSysfs, name, "dev"))
	if err != nil {
		return "", fmt.Errorf("%s: reading its major:minor: %w", name, err)
	}
	majmin := strings.SplitN(strings.TrimSpace(string(raw)), ":", 2)
	if len(majmin) != 2 {
		return "", fmt.Errorf("%s: major:minor %q", name, raw)
	}
	major, err1 := strconv.ParseUint(majmin[0], 10, 32)
	minor, err2 := strconv.ParseUint(majmin[1], 10, 32)
	if err1 != nil || err2 != nil {
		return "", fmt.Errorf("%s: major:minor %q", name, raw)
	}
	want := unix.Mkdev(uint32(major), uint32(minor))
	var st unix.Stat_t
	switch err := unix.Stat(path, &st); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == want:
		return path, nil
	case err == nil:
		return "", fmt.Errorf("%s exists and is not the block device %d:%d", path, major, minor)
	case !errors.Is(err, unix.ENOENT):
		return "", err
	}
	if err := unix.Mknod(path, unix.S_IFBLK|0o660, int(want)); err != nil && !errors.Is(err, unix.EEXIST) {
		return "", fmt.Errorf("mknod %s (%d:%d): %w", path, major, minor, err)
	}
	return path, nil
}

// backs says whether the loop device at devPath is bound to the file with this stat
// (same device and inode: a path string alone may name another file in another mount
// namespace, since loop devices are the machine's, not the container's).
func backs(devPath string, file *unix.Stat_t) bool {
	f, err := os.Open(devPath)
	if err != nil {
		return false
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	return err == nil && info.Device == file.Dev && info.Inode == file.Ino
}

// FindLoop returns the loop device backed by `file`, "" when none is.
func FindLoop(file string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(file)
	if err != nil {
		return "", err
	}
	names, err := loopNames()
	if err != nil {
		return "", err
	}
	for _, name := range names {
		if b := backingFileOf(name); b == "" || (b != file && b != real) {
			continue
		}
		path, err := loopNode(name)
		if err != nil {
			return "", err
		}
		if backs(path, &st) {
			return path, nil
		}
	}
	return "", nil
}

// AttachLoop returns the loop device backed by `file`, attaching a free one when none
// is (idempotent: a second call returns the same device).
func AttachLoop(file string) (string, error) {
	loopMu.Lock()
	defer loopMu.Unlock()
	if dev, err := FindLoop(file); err != nil || dev != "" {
		return dev, err
	}
	backing, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer backing.Close()
	ctl, err := os.OpenFile(loopControl, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("no loop devices here: %w", err)
	}
	defer ctl.Close()
	for attempt := 0; attempt < 16; attempt++ {
		idx, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		path, err := loopNode(fmt.Sprintf("loop%d", idx))
		if err != nil {
			return "", err
		}
		err = bindLoop(path, backing, file)
		if errors.Is(err, unix.EBUSY) {
			continue // another process (another node of this machine) took it first
		}
		if err != nil {
			return "", fmt.Errorf("attaching %s to %s: %w", path, file, err)
		}
		return path, nil
	}
	return "", fmt.Errorf("attaching a loop device to %s: every free device was taken first, 16 times", file)
}

// bindLoop binds the backing file to the device: LOOP_CONFIGURE (Linux 5.8+) in one
// call, else LOOP_SET_FD then LOOP_SET_STATUS64. No autoclear: a bind mount does not
// keep the device open, so autoclear would detach it at once.
func bindLoop(path string, backing *os.File, name string) error {
	dev, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer dev.Close()
	var info unix.LoopInfo64
	copy(info.File_name[:len(info.File_name)-1], name)
	cfg := unix.LoopConfig{Fd: uint32(backing.Fd()), Info: info}
	err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		return err
	}
	if err := unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(backing.Fd())); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(int(dev.Fd()), &info); err != nil {
		_ = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
		return err
	}
	return nil
}

// DetachLoop unbinds a loop device; one already free is fine. While something else
// holds it open (the kubelet's fd-lock loop device over it) the kernel detaches it at
// the last close.
func DetachLoop(path string) error {
	loopMu.Lock()
	defer loopMu.Unlock()
	dev, err := os.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer dev.Close()
	if err := unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detaching %s: %w", path, err)
	}
	return nil
}

// SpareLoopNode makes the node of the device LOOP_CTL_GET_FREE hands out next, so a
// `losetup -f` in this mount namespace (the kubelet's fd lock) finds it.
func SpareLoopNode() error {
	ctl, err := os.OpenFile(loopControl, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer ctl.Close()
	idx, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return err
	}
	_, err = loopNode(fmt.Sprintf("loop%d", idx))
	return err
}

// DeviceMountedAt returns a mount point where the device node at devPath is
// bind-mounted, "" when there is none. A bind mount of a device node shows in the mount
// table as the filesystem holding the node (its major:minor) with the node's path inside
// that filesystem as its root.
func DeviceMountedAt(devPath string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(devPath, &st); err != nil {
		return "", err
	}
	entries, err := MountEntries()
	if err != nil {
		return "", err
	}
	majmin := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	// the mount the node itself is reached through: the longest mount point above it
	var holder *MountEntry
	for i, e := range entries {
		if e.MajMin == majmin && (devPath == e.Point || strings.HasPrefix(devPath, strings.TrimSuffix(e.Point, "/")+"/")) &&
			(holder == nil || len(e.Point) > len(holder.Point)) {
			holder = &entries[i]
		}
	}
	if holder == nil {
		return "", nil
	}
	root := filepath.Join(holder.Root, strings.TrimPrefix(devPath, holder.Point))
	for _, e := range entries {
		if e.MajMin == majmin && e.Root == root && e.Point != devPath {
			return e.Point, nil
		}
	}
	return "", nil
}

// ReleaseLoops detaches every loop device backed by a file or device node below the given
// directories, the kubelet's fd-lock devices (over its block map paths) before the
// driver's (over backing files), and returns what it detached. For a node about to be
// deleted with pods still on it: loop devices are the machine's kernel's and would
// outlive the node, holding their backing files.
func ReleaseLoops(roots ...string) ([]string, error) {
	var released []string
	var errs []error
	for _, root := range roots {
		var paths []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				paths = append(paths, path)
			}
			return nil
		})
		for _, path := range paths {
			dev, err := FindLoop(path)
			if err != nil || dev == "" {
				continue // not a backing file (or gone meanwhile)
			}
			if err := DetachLoop(dev); err != nil {
				errs = append(errs, err)
				continue
			}
			released = append(released, fmt.Sprintf("%s (%s)", dev, path))
		}
	}
	return released, errors.Join(errs...)
}
