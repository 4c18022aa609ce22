"""The Psycopg connection under a Django or SQLAlchemy transaction, to pass as ``conn=``: the job
then commits with the framework's transaction and rolls back with it (one transaction, one
connection). Both frameworks must run on Psycopg 3 (Django's ``postgresql`` backend with
``psycopg`` installed; SQLAlchemy's ``postgresql+psycopg://`` URLs). The ``Queue`` itself may sit
on an unopened pool (``ConnectionPool(url, open=False)``): a call given ``conn`` never uses it.

Example (Django)::

    with transaction.atomic():
        order = Order.objects.create(total=42)
        queue.enqueue("order.fulfill", {"orderId": order.id}, conn=django_connection())

Example (SQLAlchemy 2)::

    with Session(engine) as session, session.begin():
        session.add(Order(total=42))
        queue.enqueue("order.fulfill", {"orderId": 1}, conn=sqlalchemy_connection(session))
"""

from __future__ import annotations

from typing import Any

import psycopg


def _psycopg(conn: Any, framework: str) -> psycopg.Connection[Any]:
    if not isinstance(conn, psycopg.Connection):
        raise TypeError(f"{framework} does not run on Psycopg 3 here (its connection is a {type(conn).__name__}); use the psycopg driver")
    return conn


def django_connection(using: str = "default") -> psycopg.Connection[Any]:
    """The Psycopg connection of Django's database ``using``, opened if need be: inside
    ``transaction.atomic()`` a call given it joins the atomic block's transaction."""
    from django.db import connections

    wrapper = connections[using]
    wrapper.ensure_connection()
    return _psycopg(wrapper.connection, "Django")


def sqlalchemy_connection(session_or_connection: Any) -> psycopg.Connection[Any]:
    """The Psycopg connection under an SQLAlchemy 2 ``Session`` or ``Connection`` (the session's
    connection for its current transaction, begun if need be)."""
    from sqlalchemy.orm import Session

    connection = session_or_connection.connection() if isinstance(session_or_connection, Session) else session_or_connection
    return _psycopg(connection.connection.driver_connection, "SQLAlchemy")
