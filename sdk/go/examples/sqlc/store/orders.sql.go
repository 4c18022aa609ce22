// Query methods as sqlc generates them from queries/orders.sql (written by hand for the example).
package store

import (
	"context"
)

const createOrder = `-- name: CreateOrder :one
INSERT INTO shop_order (id, total_cents) VALUES ($1, $2)
RETURNING id, total_cents
`

type CreateOrderParams struct {
	ID         string
	TotalCents int64
}

type ShopOrder struct {
	ID         string
	TotalCents int64
}

func (q *Queries) CreateOrder(ctx context.Context, arg CreateOrderParams) (ShopOrder, error) {
	row := q.db.QueryRow(ctx, createOrder, arg.ID, arg.TotalCents)
	var i ShopOrder
	err := row.Scan(&i.ID, &i.TotalCents)
	return i, err
}

const countOrders = `-- name: CountOrders :one
SELECT count(*) FROM shop_order
`

func (q *Queries) CountOrders(ctx context.Context) (int64, error) {
	row := q.db.QueryRow(ctx, countOrders)
	var count int64
	err := row.Scan(&count)
	return count, err
}
