package driver

// ListVolumes and ListSnapshots paging. The token is "after:<last id of the previous
// page>": pages continue after that id in id order, so deleting or adding volumes between
// pages neither repeats nor skips the others, and a deleted last volume still makes a
// valid token.

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

const tokenPrefix = "after:"

// ErrBadToken marks a starting_token this driver never handed out (ABORTED).
var ErrBadToken = errors.New("invalid starting_token")

// Page returns the ids of one page and the next token ("" on the last page).
func Page(sortedIDs []string, startingToken string, maxEntries int32) ([]string, string, error) {
	if maxEntries < 0 {
		return nil, "", fmt.Errorf("max_entries %d < 0", maxEntries)
	}
	start := 0
	if startingToken != "" {
		after, ok := strings.CutPrefix(startingToken, tokenPrefix)
		if !ok || after == "" {
			return nil, "", fmt.Errorf("%w %q (want a next_token of an earlier list call)", ErrBadToken, startingToken)
		}
		start = sort.Search(len(sortedIDs), func(i int) bool { return sortedIDs[i] > after })
	}
	rest := sortedIDs[start:]
	if maxEntries == 0 || int(maxEntries) >= len(rest) {
		return rest, "", nil
	}
	page := rest[:maxEntries]
	return page, tokenPrefix + page[len(page)-1], nil
}
