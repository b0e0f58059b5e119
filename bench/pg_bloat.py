"""PostgreSQL: table and index bloat after a retention pass, and what ``maintain()`` does about it (issue 26, pain 4).

    DURASTATE_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python bench/pg_bloat.py

20,000 kv values of 2,000 bytes, 90 % deleted, then ``maintain()``,
``maintain(vacuum=True)`` and 18,000 new values; the kv table's size, its
indexes' and its dead rows after each step.
"""

import os

import psycopg

import durastate

base = os.environ["DURASTATE_BENCH_POSTGRES_URL"]
schema = f"bl_{os.getpid()}"
with psycopg.connect(base, autocommit=True) as a:
    a.execute(f"CREATE SCHEMA {schema}")
url = f"{base}?options=-csearch_path%3D{schema}"
s = durastate.open(url)
size = (
    "SELECT pg_table_size('ds_kv'), pg_indexes_size('ds_kv'),"
    " (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'ds_kv'::regclass)"
)


def show(label):
    with psycopg.connect(url, autocommit=True) as c:
        t, i, dead = c.execute(size).fetchone()
    print(f"{label:28s} table {t / 1e6:6.1f} MB  indexes {i / 1e6:5.1f} MB  dead rows {dead}")


N = 20000
for start in range(0, N, 1000):
    s.kv.put_many(b"s", b"ns", [(b"%06d" % i, os.urandom(2000)) for i in range(start, start + 1000)])
show("written (40 MB)")
s.kv.delete(b"s", b"ns", [b"%06d" % i for i in range(N) if i % 10])
show("90 % deleted")
r = s.maintain()
show("maintain()")
r = s.maintain(vacuum=True)
show("maintain(vacuum=True)")
print("bytes_returned", r.bytes_returned)
for start in range(0, N, 1000):
    s.kv.put_many(b"s", b"ns2", [(b"%06d" % i, os.urandom(2000)) for i in range(start, start + 1000) if i % 10])
show("18,000 new values written")
s.close()
with psycopg.connect(base, autocommit=True) as a:
    a.execute(f"DROP SCHEMA {schema} CASCADE")
