package driver

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestMountPointsUnescapes(t *testing.T) {
	info := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(info, []byte(
		"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"+
			`90 22 8:1 /x /tmp/with\040space rw shared:1 - ext4 /dev/sda1 rw`+"\n"), 0o644)
	old := MountInfoPath
	MountInfoPath = info
	defer func() { MountInfoPath = old }()
	got, err := MountPoints()
	if err != nil || !reflect.DeepEqual(got, []string{"/", "/tmp/with space"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	if ok, _ := IsMountPoint("/tmp/with space"); !ok {
		t.Fatal("escaped mount point not found")
	}
}
