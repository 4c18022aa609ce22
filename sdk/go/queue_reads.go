package workhorse

import "context"

// GetJob returns the snapshot of a job this login role enqueued (the producer capability;
// Admin.GetJob reads any job), or nil: an unknown id and another role's job both answer nil,
// so a producer learns nothing about other jobs.
//
//	id, _ := queue.Enqueue(ctx, "report.build", Month{"2030-01"}, nil)
//	job, err := queue.GetJob(ctx, id)
func (q *Queue) GetJob(ctx context.Context, jobID string) (*JobSnapshot, error) {
	if err := checkJobID(jobID, "jobId"); err != nil {
		return nil, err
	}
	if err := q.schema.check(ctx, q.db); err != nil {
		return nil, err
	}
	var job *JobSnapshot
	var seq int64
	err := queryAll(ctx, q.db, getOwnJobSQL, []any{jobID}, func(r rows) error {
		j, err := scanJobRow(r, &seq, nil)
		job = &j
		return err
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}
