package workhorse

import "context"

// JobLink is a related job and its current state.
type JobLink struct {
	ID    string
	State JobState
}

// ChildLink is a child job, with the key of the RunChild / RunChildren call that started it.
type ChildLink struct {
	JobLink
	Key string
}

// JobLineage is what Admin.GetJob reports of the jobs a job waits on and its family.
type JobLineage struct {
	// Dependencies are the prerequisites given in DependsOn, in that order.
	Dependencies []JobLink
	// WaitingOn: while the job is `blocked`, the prerequisites or children that have not ended.
	WaitingOn []JobLink
	// ParentID is the job that started this one with RunChild(ren), or "".
	ParentID string
	// Children are the jobs this one started with RunChild(ren).
	Children []ChildLink
}

func (a *Admin) lineage(ctx context.Context, jobID string, state JobState) (JobLineage, error) {
	l := JobLineage{Dependencies: []JobLink{}, WaitingOn: []JobLink{}, Children: []ChildLink{}}
	err := queryAll(ctx, a.db, jobLinksSQL, []any{jobID}, func(r rows) error {
		var relation, id, linkState string
		var key *string
		if err := r.Scan(&relation, &id, &linkState, &key); err != nil {
			return err
		}
		link := JobLink{ID: id, State: JobState(linkState)}
		switch relation {
		case "dependency":
			l.Dependencies = append(l.Dependencies, link)
		case "parent":
			l.ParentID = id
		default:
			l.Children = append(l.Children, ChildLink{JobLink: link, Key: deref(key)})
		}
		return nil
	})
	if err != nil || state != StateBlocked {
		return l, err
	}
	for _, link := range l.Dependencies {
		if live(link.State) {
			l.WaitingOn = append(l.WaitingOn, link)
		}
	}
	for _, child := range l.Children {
		if live(child.State) {
			l.WaitingOn = append(l.WaitingOn, child.JobLink)
		}
	}
	return l, nil
}

func live(s JobState) bool {
	return s == StateBlocked || s == StateScheduled || s == StateReady || s == StateActive
}

// listChildren pages a parent's children in the order they were started.
func (a *Admin) listChildren(ctx context.Context, parentID string, queue, typ, states any, limit int, cursor string) (Page[JobSnapshot], error) {
	var page Page[JobSnapshot]
	if err := checkJobID(parentID, "parentId"); err != nil {
		return page, err
	}
	var next string
	var err error
	page.Items, _, err = a.snapshots(ctx, listChildrenSQL,
		[]any{parentID, queue, typ, states, limit, nullable(cursor)}, &next)
	page.NextCursor = next
	return page, err
}
