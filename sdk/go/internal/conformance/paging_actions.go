package conformance

import (
	"context"
	"encoding/json"
	"fmt"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// pagingAction runs expect_pages (sdk/conformance/README.md): a listing read page by page must
// have the page sizes given, and each cursor of "refuses" (a literal, or the first cursor of
// another listing) must be refused with a validation error naming the cursor.
func (r *Runner) pagingAction(ctx context.Context, a Action) (bool, error) {
	if a.Do() != "expect_pages" {
		return false, nil
	}
	var limit int
	var want []int
	if err := json.Unmarshal(a["limit"], &limit); err != nil {
		return true, err
	}
	if err := json.Unmarshal(a["sizes"], &want); err != nil {
		return true, err
	}
	var sizes []int
	cursor := ""
	for len(sizes) < 100 {
		n, next, err := r.page(ctx, a, limit, cursor)
		if err != nil {
			return true, err
		}
		sizes = append(sizes, n)
		if cursor = next; cursor == "" {
			break
		}
	}
	if fmt.Sprint(sizes) != fmt.Sprint(want) {
		return true, fmt.Errorf("page sizes %v, want %v", sizes, want)
	}
	var refuses []json.RawMessage
	if a["refuses"] != nil {
		if err := json.Unmarshal(a["refuses"], &refuses); err != nil {
			return true, err
		}
	}
	for _, refused := range refuses {
		var foreign string
		if json.Unmarshal(refused, &foreign) != nil {
			var of struct {
				CursorOf Action `json:"cursorOf"`
			}
			if err := json.Unmarshal(refused, &of); err != nil {
				return true, err
			}
			_, next, err := r.page(ctx, of.CursorOf, 1, "")
			if err != nil {
				return true, err
			}
			if foreign = next; foreign == "" {
				return true, fmt.Errorf("no cursor from %s", refused)
			}
		}
		_, _, err := r.page(ctx, a, limit, foreign)
		if err == nil {
			return true, fmt.Errorf("cursor %q was accepted", foreign)
		}
		if e := r.expectError(err, json.RawMessage(`{"kind": "validation", "field": "cursor"}`)); e != nil {
			return true, e
		}
	}
	return true, nil
}

// page reads one page of the listing a names, filtered by its queue or job: the number of items
// and the next cursor.
func (r *Runner) page(ctx context.Context, a Action, limit int, cursor string) (int, string, error) {
	switch a.str("listing") {
	case "jobs":
		p, err := r.Admin.ListJobs(ctx, workhorse.ListJobsFilter{Queue: a.str("queue"), Limit: limit, Cursor: cursor})
		return len(p.Items), p.NextCursor, err
	case "dead_letters":
		p, err := r.Admin.ListDeadLetters(ctx, workhorse.ListDeadLettersOptions{
			DeadLetterFilter: workhorse.DeadLetterFilter{Queue: a.str("queue")}, Limit: limit, Cursor: cursor})
		return len(p.Items), p.NextCursor, err
	case "timeline":
		id, err := r.id(a, "job")
		if err != nil {
			return 0, "", err
		}
		p, err := r.Admin.GetJobTimeline(ctx, id, workhorse.TimelineOptions{Limit: limit, Cursor: cursor})
		return len(p.Items), p.NextCursor, err
	case "human_waits":
		filter := workhorse.HumanWaitFilter{Queue: a.str("queue"), Limit: limit, Cursor: cursor}
		if a["job"] != nil {
			id, err := r.id(a, "job")
			if err != nil {
				return 0, "", err
			}
			filter = workhorse.HumanWaitFilter{JobID: id, Limit: limit, Cursor: cursor}
		}
		p, err := r.Admin.ListHumanWaits(ctx, filter)
		return len(p.Items), p.NextCursor, err
	}
	return 0, "", fmt.Errorf("unknown listing %q", a.str("listing"))
}
