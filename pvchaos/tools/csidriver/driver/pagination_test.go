package driver

import (
	"errors"
	"reflect"
	"testing"
)

func TestPage(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		page, next, err := Page(ids, token, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		token = next
	}
	if !reflect.DeepEqual(got, ids) {
		t.Fatalf("pages joined = %v", got)
	}
	if page, next, _ := Page(ids, "", 0); len(page) != 5 || next != "" {
		t.Errorf("max_entries 0 = all: %v %q", page, next)
	}
	// The last volume of a page deleted before the next call: the token still works.
	page, next, err := Page([]string{"a", "c", "d"}, "after:b", 1)
	if err != nil || !reflect.DeepEqual(page, []string{"c"}) || next != "after:c" {
		t.Errorf("after deleted b: %v %q %v", page, next, err)
	}
	if _, _, err := Page(ids, "invalid-token", 1); !errors.Is(err, ErrBadToken) {
		t.Errorf("bad token: %v", err)
	}
	if _, _, err := Page(ids, "", -1); err == nil || errors.Is(err, ErrBadToken) {
		t.Errorf("negative max_entries: %v", err)
	}
	if page, next, err := Page(ids, "after:e", 3); err != nil || len(page) != 0 || next != "" {
		t.Errorf("past the end: %v %q %v", page, next, err)
	}
}
