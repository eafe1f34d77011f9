package driver

// Copying a volume's bytes: its backing directory (files, directories, symlinks) into a
// snapshot, and a snapshot or a volume into a new volume. A block volume's backing file
// is sparse and as large as the volume, so regular files are copied extent by extent
// (SEEK_DATA/SEEK_HOLE): a 10 GiB block volume with 1 MiB written copies 1 MiB.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CopyTree copies the tree at src into dst, which must not exist yet; a missing src (a
// volume no node has staged yet: it holds no bytes) copies as an empty directory. Other
// file types (sockets, devices, FIFOs) are an error: their contents cannot be copied.
func CopyTree(src, dst string) error {
	if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
		return mkdirOpen(dst)
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm()) // umask must not decide
		case info.Mode().Type() == fs.ModeSymlink:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return fmt.Errorf("%s: cannot copy a %v", path, info.Mode().Type())
	})
}

func mkdirOpen(dir string) error {
	if err := os.Mkdir(dir, 0o777); err != nil {
		return err
	}
	return os.Chmod(dir, 0o777)
}

// copyFile copies a regular file's data extents and keeps its size (and so its holes).
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if err := copyExtents(in, out, st.Size()); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := out.Truncate(st.Size()); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyExtents copies [data, hole) ranges; a filesystem without SEEK_DATA copies it all.
func copyExtents(in, out *os.File, size int64) error {
	fd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole remains: Truncate makes it
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return copyRange(in, out, off, size)
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if err := copyRange(in, out, data, hole); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

func copyRange(in, out *os.File, from, to int64) error {
	_, err := io.Copy(io.NewOffsetWriter(out, from), io.NewSectionReader(in, from, to-from))
	return err
}
